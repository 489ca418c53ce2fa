-- Written by hand (Prisma's schema language cannot express triggers). Ingest keeps each webhook's
-- lookup per process (src/ingest/ingest-target-cache.ts); a management change must be seen by
-- the next request of every process. Every change to what the lookup reads raises the webhook's
-- config_version (migrations ingest_target_version and provider_packs: the webhook's own columns,
-- its secrets and destinations, its project's tier and quotas), and a webhook row is deleted
-- with the webhook: this trigger tells every process listening (pub/sub channel app_events,
-- topic ingest-targets:changed, as src/db/pubsub.ts writes its payloads) which lookups to drop.
-- pg_notify in the change's own transaction is delivered when it commits, and not at all when it
-- rolls back; every writer is covered (API processes, workers, the admin CLI, psql).
CREATE FUNCTION ingest_target_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ids text[];
BEGIN
  IF TG_OP = 'DELETE' THEN
    ids := ARRAY[OLD.public_id];
  ELSIF OLD.public_id IS DISTINCT FROM NEW.public_id THEN
    ids := ARRAY[OLD.public_id, NEW.public_id];
  ELSE
    ids := ARRAY[NEW.public_id];
  END IF;
  -- No `a` (publish time): relay_pubsub_lag_seconds counts PgPubSub.publish's messages only.
  PERFORM pg_notify('app_events', '{"t":"ingest-targets:changed","p":{"publicIds":' || array_to_json(ids)::text || '}}');
  RETURN NULL;
END $$;

-- Row-level with a WHEN clause: the delivery engine's in-flight and throttle updates of the same
-- rows never reach the function.
CREATE TRIGGER webhooks_ingest_target_changed
  AFTER UPDATE ON webhooks
  FOR EACH ROW
  WHEN (OLD.config_version IS DISTINCT FROM NEW.config_version OR OLD.public_id IS DISTINCT FROM NEW.public_id)
  EXECUTE FUNCTION ingest_target_changed();

CREATE TRIGGER webhooks_ingest_target_deleted
  AFTER DELETE ON webhooks
  FOR EACH ROW
  EXECUTE FUNCTION ingest_target_changed();
