-- Hand-written (Prisma's schema language cannot express storage parameters).

-- VACUUM truncates the empty pages at the end of a table under an ACCESS EXCLUSIVE lock, which
-- every statement on the table then waits behind: on the tables every ingest statement or
-- delivery writes, a stall of the whole pipeline (half a second, seen at 400 events/s when the
-- job queue shrank after a burst). These tables refill what they free, so they keep their pages.
-- (graphile-worker's job tables get the same in src/db/migrate.ts, after its own migrations.)
ALTER TABLE events SET (vacuum_truncate = false);
ALTER TABLE deliveries SET (vacuum_truncate = false);
ALTER TABLE delivery_attempts SET (vacuum_truncate = false);
ALTER TABLE usage_counters SET (vacuum_truncate = false);
ALTER TABLE rate_limit_windows SET (vacuum_truncate = false);
ALTER TABLE webhook_metric_buckets SET (vacuum_truncate = false);
ALTER TABLE inbound_dedupe SET (vacuum_truncate = false);
ALTER TABLE drain_outbox SET (vacuum_truncate = false);
ALTER TABLE files SET (vacuum_truncate = false);
