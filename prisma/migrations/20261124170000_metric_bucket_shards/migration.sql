-- Hand-written (Prisma's schema language cannot express functions).

-- Ingest counted its events in the roll-ups on 8 shard rows (the backend's pid mod 8), so with a
-- pool of 20 connections two or three ingest statements shared a row, each waiting for the
-- other's commit (its WAL flush) to update it: at 400 events/s that wait was about half of the
-- ingest statement's time (pg_stat_statements). Now 16 shards, numbered 9 to 24: 8 stays the job
-- runners' results row (src/metrics/rollup.ts), and rows of shards 0-7 written before still count,
-- since every reader sums a bucket's shards.
CREATE OR REPLACE FUNCTION metrics_events_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_metric_buckets AS b (webhook_id, size, bucket_start, shard, project_id, ingested)
  SELECT n.webhook_id, s.size, metrics_bucket(now(), s.size), 9 + pg_backend_pid() % 16, n.project_id, count(*)
    FROM new_rows n CROSS JOIN (VALUES (60), (900), (7200), (21600)) AS s(size)
   GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4
  ON CONFLICT (webhook_id, size, bucket_start, shard) DO UPDATE SET ingested = b.ingested + excluded.ingested;
  RETURN NULL;
END $$;
