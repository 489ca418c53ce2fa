-- Usage counters kept by the database itself, so every writer (ingest, replay and re-drive,
-- the delivery engine, retention, cascading deletes) keeps them right without calling anything,
-- in its own transaction. Prisma's schema language cannot express triggers, so this migration is
-- written by hand; it must sort after the generated init migration (rename it when init is regenerated).
--
-- Counters are spread over 32 shard rows chosen by the writing connection (backend pid mod 32),
-- so concurrent transactions seldom wait on one another's row lock; a counter is the sum of its shards.
--   deliveries            period YYYY-MM and YYYY-MM-DD, project only: every delivery created
--   backlog_depth         period 'current', project and webhook: deliveries not yet terminal
--   stored_payload_bytes  period 'current', project and webhook: bytes of retained events.body

CREATE FUNCTION usage_counter_shard() RETURNS integer LANGUAGE sql VOLATILE AS $$ SELECT pg_backend_pid() % 32 $$;

CREATE FUNCTION delivery_is_active(status text) RETURNS boolean LANGUAGE sql IMMUTABLE AS
$$ SELECT status IN ('queued', 'scheduled', 'delivering', 'retrying') $$;

CREATE FUNCTION usage_deliveries_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  month text := to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM');
  day text := to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD');
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, c.metric, c.period, usage_counter_shard(), sum(c.n)
  FROM (
    SELECT project_id, '' AS webhook_id, 'deliveries' AS metric, month AS period, 1 AS n FROM new_rows
    UNION ALL SELECT project_id, '', 'deliveries', day, 1 FROM new_rows
    UNION ALL SELECT project_id, '', 'backlog_depth', 'current', 1 FROM new_rows WHERE delivery_is_active(status)
    UNION ALL SELECT project_id, webhook_id, 'backlog_depth', 'current', 1 FROM new_rows WHERE delivery_is_active(status)
  ) c
  GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_deliveries_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'backlog_depth', 'current', usage_counter_shard(), -count(*)
  FROM (
    SELECT project_id, '' AS webhook_id FROM old_rows WHERE delivery_is_active(status)
    UNION ALL SELECT project_id, webhook_id FROM old_rows WHERE delivery_is_active(status)
  ) c
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

-- Row-level with a WHEN clause: the delivery engine updates deliveries often, and only
-- transitions between active and terminal states reach this function.
CREATE FUNCTION usage_delivery_status_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  delta bigint := CASE WHEN delivery_is_active(NEW.status) THEN 1 ELSE -1 END;
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  VALUES (NEW.project_id, '', 'backlog_depth', 'current', usage_counter_shard(), delta),
         (NEW.project_id, NEW.webhook_id, 'backlog_depth', 'current', usage_counter_shard(), delta)
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE TRIGGER usage_deliveries_inserted AFTER INSERT ON deliveries
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_deliveries_inserted();
CREATE TRIGGER usage_deliveries_deleted AFTER DELETE ON deliveries
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_deliveries_deleted();
CREATE TRIGGER usage_delivery_status_changed AFTER UPDATE OF status ON deliveries
  FOR EACH ROW WHEN (delivery_is_active(OLD.status) IS DISTINCT FROM delivery_is_active(NEW.status))
  EXECUTE FUNCTION usage_delivery_status_changed();

-- Events: retained payload bytes. Retention sets body to NULL in bulk, hence statement-level
-- triggers; a trigger function sees its transition tables only in its own body, so one per operation.
CREATE FUNCTION usage_events_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), sum(c.bytes)
  FROM (
    SELECT project_id, '' AS webhook_id, octet_length(body)::bigint AS bytes FROM new_rows WHERE body IS NOT NULL
    UNION ALL SELECT project_id, webhook_id, octet_length(body) FROM new_rows WHERE body IS NOT NULL
  ) c
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), -sum(c.bytes)
  FROM (
    SELECT project_id, '' AS webhook_id, octet_length(body)::bigint AS bytes FROM old_rows WHERE body IS NOT NULL
    UNION ALL SELECT project_id, webhook_id, octet_length(body) FROM old_rows WHERE body IS NOT NULL
  ) c
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_events_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), sum(c.bytes)
  FROM (
    SELECT n.project_id, n.webhook_id, coalesce(octet_length(n.body), 0)::bigint - coalesce(octet_length(o.body), 0) AS bytes
    FROM new_rows n JOIN old_rows o ON o.id = n.id
  ) d
  CROSS JOIN LATERAL (VALUES (d.project_id, ''::text, d.bytes), (d.project_id, d.webhook_id, d.bytes)) AS c(project_id, webhook_id, bytes)
  WHERE d.bytes <> 0
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE TRIGGER usage_events_inserted AFTER INSERT ON events
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_events_inserted();
CREATE TRIGGER usage_events_deleted AFTER DELETE ON events
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_events_deleted();
CREATE TRIGGER usage_events_updated AFTER UPDATE ON events
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_events_updated();

-- A destroyed webhook's own counters and rate windows go with it, and a deleted project's. Deferred
-- to commit: the cascading deletes of events and deliveries update counters until the statement ends.
CREATE FUNCTION usage_webhook_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM usage_counters WHERE project_id = OLD.project_id AND webhook_id = OLD.id;
  DELETE FROM rate_limit_windows WHERE key LIKE '%:' || OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER usage_webhook_deleted AFTER DELETE ON webhooks DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION usage_webhook_deleted();

CREATE FUNCTION usage_project_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM usage_counters WHERE project_id = OLD.id;
  DELETE FROM rate_limit_windows WHERE key LIKE '%:' || OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER usage_project_deleted AFTER DELETE ON projects DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION usage_project_deleted();
