-- Written by hand (Prisma's schema language cannot express triggers).
--
-- The notification of a webhook's change (migration ingest_target_changes) now says the
-- config_version the change made ("v"). A process drops its kept ingest lookup only when that
-- lookup is older (src/ingest/ingest-target-cache.ts): the process that made the change already
-- dropped it before answering, and a lookup it read again since is up to date, so the
-- notification arriving a moment later no longer makes it read the webhook once more. A deleted
-- webhook's notification has no version: its lookups always go.
CREATE OR REPLACE FUNCTION ingest_target_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ids text[];
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('app_events', '{"t":"ingest-targets:changed","p":{"publicIds":' || array_to_json(ARRAY[OLD.public_id])::text || '}}');
    RETURN NULL;
  END IF;
  IF OLD.public_id IS DISTINCT FROM NEW.public_id THEN
    ids := ARRAY[OLD.public_id, NEW.public_id];
  ELSE
    ids := ARRAY[NEW.public_id];
  END IF;
  -- No `a` (publish time): relay_pubsub_lag_seconds counts PgPubSub.publish's messages only.
  PERFORM pg_notify('app_events', '{"t":"ingest-targets:changed","p":{"publicIds":' || array_to_json(ids)::text || ',"v":' || NEW.config_version || '}}');
  RETURN NULL;
END $$;
