-- Hand-written (Prisma's schema language cannot express triggers).

-- Ingested events are no longer counted by a trigger on events, which upserted four
-- webhook_metric_buckets rows (one per bucket size) inside every ingest statement: a quarter of
-- that statement's time at a steady rate (pg_stat_statements). The process that stored an event
-- counts it now and writes its counts once a second (src/metrics/ingest-counts.ts); an event stored
-- in a caller's transaction is counted in that transaction. Rows written before still count.
DROP TRIGGER IF EXISTS metrics_events_inserted ON events;
DROP FUNCTION IF EXISTS metrics_events_inserted();
