-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN     "dedupe_window_seconds" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "inbound_dedupe" (
    "webhook_id" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "inbound_dedupe_pkey" PRIMARY KEY ("webhook_id","key")
);

-- CreateIndex
CREATE INDEX "inbound_dedupe_expires_at_idx" ON "inbound_dedupe"("expires_at");

-- AddForeignKey
ALTER TABLE "inbound_dedupe" ADD CONSTRAINT "inbound_dedupe_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Written by hand after the generated SQL above: ingest's kept lookup (migration
-- ingest_target_version) now also reads the webhook's provider pack and its dedupe window, so a
-- change to either raises config_version like every other change the lookup reads.
DROP TRIGGER webhooks_config_version ON webhooks;
CREATE TRIGGER webhooks_config_version
  BEFORE UPDATE OF status, routing, quota_overrides, default_delay_seconds, delivery_mode, public_id, project_id, provider_pack, dedupe_window_seconds ON webhooks
  FOR EACH ROW EXECUTE FUNCTION webhook_config_changed();
