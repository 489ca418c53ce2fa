-- Hand-written (no schema change): drain_emit only writes outbox rows.
--
-- It used to plan the drain's send job too (graphile_worker.add_job with the drain's job key),
-- an upsert of one job row that stayed locked until the caller's commit: every runner's
-- record statement of a project with an enabled drain waited on it. Sends are now planned
-- outside the delivery path (src/drains/schedule.ts: every job runner, about once a second).
CREATE OR REPLACE FUNCTION drain_emit(p_project text, p_webhook text, p_kind text, p_data jsonb) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  INSERT INTO drain_outbox (drain_id, event_id, kind, project_id, webhook_id, data)
  SELECT d.id, 'dre_' || replace(gen_random_uuid()::text, '-', ''), p_kind, p_project, p_webhook, p_data
    FROM event_drains d WHERE d.project_id = p_project AND d.enabled AND p_kind = ANY (d.events) ORDER BY d.id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
