-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN     "config_version" INTEGER NOT NULL DEFAULT 0;

-- Written by hand after the generated column above (Prisma's schema language cannot express
-- triggers). Ingest caches each webhook's lookup per process (src/ingest/ingest-target-cache.ts)
-- and stores an event only while webhooks.config_version is still the version it read: every
-- writer of what that lookup reads raises the version here, in its own transaction.

-- The webhook's own columns that ingest reads. UPDATE OF fires when the column is set, changed or
-- not: an extra raise only costs a cache miss. The delivery engine's counters are not among them.
CREATE FUNCTION webhook_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.config_version := OLD.config_version + 1;
  RETURN NEW;
END $$;

CREATE TRIGGER webhooks_config_version
  BEFORE UPDATE OF status, routing, quota_overrides, default_delay_seconds, delivery_mode, public_id, project_id ON webhooks
  FOR EACH ROW EXECUTE FUNCTION webhook_config_changed();

-- Its secrets and destinations.
CREATE FUNCTION webhook_part_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhooks SET config_version = config_version + 1
   WHERE id IN (CASE WHEN TG_OP <> 'INSERT' THEN OLD.webhook_id END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.webhook_id END);
  RETURN NULL;
END $$;

CREATE TRIGGER webhook_secrets_config_version
  AFTER INSERT OR UPDATE OR DELETE ON webhook_secrets
  FOR EACH ROW EXECUTE FUNCTION webhook_part_changed();

CREATE TRIGGER destinations_config_version
  AFTER INSERT OR UPDATE OR DELETE ON destinations
  FOR EACH ROW EXECUTE FUNCTION webhook_part_changed();

-- Its project's tier and quotas.
CREATE FUNCTION project_quotas_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhooks SET config_version = config_version + 1 WHERE project_id = NEW.id;
  RETURN NULL;
END $$;

CREATE TRIGGER projects_config_version
  AFTER UPDATE OF tier, custom_quotas, overage_enabled ON projects
  FOR EACH ROW EXECUTE FUNCTION project_quotas_changed();
