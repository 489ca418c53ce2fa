-- AlterTable
ALTER TABLE "projects" ADD COLUMN     "egress_allowed_hosts" JSONB NOT NULL DEFAULT '[]';

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "automation_id" TEXT,
ADD COLUMN     "automation_version" INTEGER;

-- CreateTable
CREATE TABLE "automations" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "current_version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "automations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "automation_versions" (
    "automation_id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "code" TEXT NOT NULL,
    "code_sha256" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "automation_versions_pkey" PRIMARY KEY ("automation_id","version")
);

-- CreateTable
CREATE TABLE "automation_runs" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "automation_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "delivery_id" TEXT,
    "status" TEXT NOT NULL,
    "cpu_ms" DOUBLE PRECISION NOT NULL,
    "subrequests" INTEGER NOT NULL,
    "logs" TEXT NOT NULL,
    "log_bytes" INTEGER NOT NULL,
    "logs_truncated" BOOLEAN NOT NULL,
    "error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "automation_runs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "automation_leases" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "automation_leases_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "automations_project_id_id_idx" ON "automations"("project_id", "id");

-- CreateIndex
CREATE INDEX "automation_versions_project_id_created_at_idx" ON "automation_versions"("project_id", "created_at");

-- CreateIndex
CREATE INDEX "automation_runs_automation_id_id_idx" ON "automation_runs"("automation_id", "id");

-- CreateIndex
CREATE INDEX "automation_runs_project_id_id_idx" ON "automation_runs"("project_id", "id");

-- CreateIndex
CREATE INDEX "automation_leases_project_id_expires_at_idx" ON "automation_leases"("project_id", "expires_at");

-- AddForeignKey
ALTER TABLE "automations" ADD CONSTRAINT "automations_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "automation_versions" ADD CONSTRAINT "automation_versions_automation_id_fkey" FOREIGN KEY ("automation_id") REFERENCES "automations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "automation_runs" ADD CONSTRAINT "automation_runs_automation_id_fkey" FOREIGN KEY ("automation_id") REFERENCES "automations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Takes one of a project's Automation concurrency slots (a lease row) when fewer than `lim`
-- unexpired leases exist, across every runner. The advisory lock serialises takers of one
-- project until the (implicit) transaction ends; each statement of this volatile function sees
-- what concurrent takers committed before it. Expired leases (a runner that died) are removed.
CREATE FUNCTION automation_lease_take(project text, lease text, lim int, ttl_ms int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  taken int;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('automation-concurrency:' || project, 0));
  DELETE FROM automation_leases WHERE project_id = project AND expires_at <= now();
  SELECT count(*) INTO taken FROM automation_leases WHERE project_id = project;
  IF taken >= lim THEN
    RETURN false;
  END IF;
  INSERT INTO automation_leases (id, project_id, expires_at) VALUES (lease, project, now() + make_interval(secs => ttl_ms::float8 / 1000));
  RETURN true;
END $$;
