-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN     "form_access" TEXT NOT NULL DEFAULT 'secret',
ADD COLUMN     "form_allowed_origins" TEXT[] DEFAULT ARRAY['*']::TEXT[],
ADD COLUMN     "idempotency_window_seconds" INTEGER NOT NULL DEFAULT 86400;

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "idempotency_key" TEXT;

-- CreateTable
CREATE TABLE "ingest_idempotency_keys" (
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "ingest_idempotency_keys_pkey" PRIMARY KEY ("webhook_id","key")
);

-- CreateTable
CREATE TABLE "email_allowlist_entries" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "pattern" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "email_allowlist_entries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "ingest_idempotency_keys_expires_at_idx" ON "ingest_idempotency_keys"("expires_at");

-- CreateIndex
CREATE INDEX "email_allowlist_entries_webhook_id_id_idx" ON "email_allowlist_entries"("webhook_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "email_allowlist_entries_webhook_id_pattern_key" ON "email_allowlist_entries"("webhook_id", "pattern");

-- CreateIndex
CREATE INDEX "deliveries_project_id_idempotency_key_idx" ON "deliveries"("project_id", "idempotency_key");

-- AddForeignKey
ALTER TABLE "ingest_idempotency_keys" ADD CONSTRAINT "ingest_idempotency_keys_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "email_allowlist_entries" ADD CONSTRAINT "email_allowlist_entries_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Written by hand after the generated SQL above (issue 32, CONTRACT §12).

-- Ingest writes the idempotency keys in its own statement: the table keeps its pages (as
-- inbound_dedupe, migration hot_tables_keep_their_pages).
ALTER TABLE ingest_idempotency_keys SET (vacuum_truncate = false);

-- Ingest's kept lookup (migrations ingest_target_version, provider_packs) now also reads the
-- idempotency window and the form controls: a change to either raises config_version.
DROP TRIGGER webhooks_config_version ON webhooks;
CREATE TRIGGER webhooks_config_version
  BEFORE UPDATE OF status, routing, quota_overrides, default_delay_seconds, delivery_mode, public_id, project_id, provider_pack, dedupe_window_seconds,
                   idempotency_window_seconds, form_access, form_allowed_origins ON webhooks
  FOR EACH ROW EXECUTE FUNCTION webhook_config_changed();

-- And the email sender allowlist, like the webhook's secrets and destinations.
CREATE TRIGGER email_allowlist_entries_config_version
  AFTER INSERT OR UPDATE OR DELETE ON email_allowlist_entries
  FOR EACH ROW EXECUTE FUNCTION webhook_part_changed();
