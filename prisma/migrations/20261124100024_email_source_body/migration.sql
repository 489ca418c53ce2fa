-- AlterTable
ALTER TABLE "events" ADD COLUMN     "source_body" BYTEA,
ADD COLUMN     "source_content_type" TEXT;

-- stored_payload_bytes counts an event's retained payload: body and, where kept, source_body
-- (email's raw message). The triggers of usage_counter_triggers, with both columns.
CREATE OR REPLACE FUNCTION event_stored_bytes(body bytea, source_body bytea) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(octet_length(body), 0)::bigint + coalesce(octet_length(source_body), 0)::bigint
$$;

CREATE OR REPLACE FUNCTION usage_events_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), sum(c.bytes)
  FROM (
    SELECT project_id, '' AS webhook_id, event_stored_bytes(body, source_body) AS bytes FROM new_rows WHERE body IS NOT NULL OR source_body IS NOT NULL
    UNION ALL SELECT project_id, webhook_id, event_stored_bytes(body, source_body) FROM new_rows WHERE body IS NOT NULL OR source_body IS NOT NULL
  ) c
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION usage_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), -sum(c.bytes)
  FROM (
    SELECT project_id, '' AS webhook_id, event_stored_bytes(body, source_body) AS bytes FROM old_rows WHERE body IS NOT NULL OR source_body IS NOT NULL
    UNION ALL SELECT project_id, webhook_id, event_stored_bytes(body, source_body) FROM old_rows WHERE body IS NOT NULL OR source_body IS NOT NULL
  ) c
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION usage_events_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'stored_payload_bytes', 'current', usage_counter_shard(), sum(c.bytes)
  FROM (
    SELECT n.project_id, n.webhook_id, event_stored_bytes(n.body, n.source_body) - event_stored_bytes(o.body, o.source_body) AS bytes
    FROM new_rows n JOIN old_rows o ON o.id = n.id
  ) d
  CROSS JOIN LATERAL (VALUES (d.project_id, ''::text, d.bytes), (d.project_id, d.webhook_id, d.bytes)) AS c(project_id, webhook_id, bytes)
  WHERE d.bytes <> 0
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;
