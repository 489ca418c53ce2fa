-- CreateTable
CREATE TABLE "webhook_failure_streaks" (
    "webhook_id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "streak" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_failure_streaks_pkey" PRIMARY KEY ("webhook_id")
);

-- CreateTable
CREATE TABLE "alert_rules" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "webhook_id" TEXT,
    "condition_type" TEXT NOT NULL,
    "threshold" DOUBLE PRECISION NOT NULL,
    "window_seconds" INTEGER NOT NULL,
    "channels" JSONB NOT NULL,
    "cooldown_seconds" INTEGER NOT NULL DEFAULT 3600,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "secret_enc" TEXT NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'ok',
    "last_fired_at" TIMESTAMP(3),
    "last_value" DOUBLE PRECISION,
    "last_evaluated_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "alert_rules_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "alert_dispatches" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "rule_id" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "value" DOUBLE PRECISION NOT NULL,
    "channels" JSONB NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "alert_dispatches_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "webhook_failure_streaks_project_id_idx" ON "webhook_failure_streaks"("project_id");

-- CreateIndex
CREATE INDEX "alert_rules_project_id_id_idx" ON "alert_rules"("project_id", "id");

-- CreateIndex
CREATE INDEX "alert_dispatches_project_id_id_idx" ON "alert_dispatches"("project_id", "id");

-- CreateIndex
CREATE INDEX "webhook_metric_buckets_project_id_size_bucket_start_idx" ON "webhook_metric_buckets"("project_id", "size", "bucket_start");

-- Hand-written (Prisma's schema language cannot express these).

-- A destroyed webhook's failure streak goes with it; a deleted project's rules and dispatches too.
CREATE FUNCTION alerts_webhook_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_failure_streaks WHERE webhook_id = OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER alerts_webhook_deleted AFTER DELETE ON webhooks DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION alerts_webhook_deleted();

CREATE FUNCTION alerts_project_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM alert_dispatches WHERE project_id = OLD.id;
  DELETE FROM alert_rules WHERE project_id = OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER alerts_project_deleted AFTER DELETE ON projects DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION alerts_project_deleted();
