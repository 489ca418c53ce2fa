-- AlterTable
ALTER TABLE "events" ADD COLUMN     "payload_purged_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "dispatch_purged_at" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "schedules" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "cron" TEXT NOT NULL,
    "timezone" TEXT NOT NULL DEFAULT 'UTC',
    "payload" JSONB NOT NULL DEFAULT '{}',
    "content_type" TEXT NOT NULL DEFAULT 'application/json',
    "headers" JSONB NOT NULL DEFAULT '{}',
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "next_run_at" TIMESTAMP(3),
    "last_run_at" TIMESTAMP(3),
    "last_event_id" TEXT,
    "last_status" TEXT,
    "skipped_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "schedules_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "retention_cursors" (
    "webhook_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "last_id" TEXT NOT NULL,

    CONSTRAINT "retention_cursors_pkey" PRIMARY KEY ("webhook_id","kind")
);

-- CreateIndex
CREATE INDEX "schedules_webhook_id_id_idx" ON "schedules"("webhook_id", "id");

-- AddForeignKey
ALTER TABLE "schedules" ADD CONSTRAINT "schedules_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;
