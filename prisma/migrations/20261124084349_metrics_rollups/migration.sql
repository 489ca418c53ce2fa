-- CreateTable
CREATE TABLE "webhook_metric_buckets" (
    "webhook_id" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "bucket_start" TIMESTAMPTZ(3) NOT NULL,
    "shard" INTEGER NOT NULL DEFAULT 0,
    "project_id" TEXT NOT NULL,
    "ingested" BIGINT NOT NULL DEFAULT 0,
    "succeeded" BIGINT NOT NULL DEFAULT 0,
    "failed" BIGINT NOT NULL DEFAULT 0,
    "attempts" BIGINT NOT NULL DEFAULT 0,
    "retries" BIGINT NOT NULL DEFAULT 0,
    "status_2xx" BIGINT NOT NULL DEFAULT 0,
    "status_3xx" BIGINT NOT NULL DEFAULT 0,
    "status_4xx" BIGINT NOT NULL DEFAULT 0,
    "status_5xx" BIGINT NOT NULL DEFAULT 0,
    "network" BIGINT NOT NULL DEFAULT 0,
    "timeout" BIGINT NOT NULL DEFAULT 0,
    "latency" JSONB NOT NULL DEFAULT '{}',

    CONSTRAINT "webhook_metric_buckets_pkey" PRIMARY KEY ("webhook_id","size","bucket_start","shard")
);

-- CreateTable
CREATE TABLE "webhook_backlog_samples" (
    "webhook_id" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "bucket_start" TIMESTAMPTZ(3) NOT NULL,
    "project_id" TEXT NOT NULL,
    "depth" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "webhook_backlog_samples_pkey" PRIMARY KEY ("webhook_id","size","bucket_start")
);

-- CreateIndex
CREATE INDEX "dlq_entries_webhook_id_redriven_at_idx" ON "dlq_entries"("webhook_id", "redriven_at");
-- Hand-written (Prisma's schema language cannot express these).

-- Adds two sparse histograms ({"<index>": count}), the merge of the latency sketches.
CREATE FUNCTION metrics_histogram_add(a jsonb, b jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN a = '{}'::jsonb THEN b WHEN b = '{}'::jsonb THEN a ELSE (
    SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb)
      FROM (SELECT k, sum(v::bigint) AS n FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) x(k, v) GROUP BY k) y)
  END $$;

-- The start of the `size`-second bucket holding `at`.
CREATE FUNCTION metrics_bucket(at timestamptz, size integer) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT to_timestamp(floor(extract(epoch FROM at) / size) * size) $$;

-- Ingested events, counted as they are stored: one statement-level trigger, every bucket size.
CREATE FUNCTION metrics_events_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_metric_buckets AS b (webhook_id, size, bucket_start, shard, project_id, ingested)
  SELECT n.webhook_id, s.size, metrics_bucket(now(), s.size), pg_backend_pid() % 8, n.project_id, count(*)
    FROM new_rows n CROSS JOIN (VALUES (60), (900), (7200), (21600)) AS s(size)
   GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4
  ON CONFLICT (webhook_id, size, bucket_start, shard) DO UPDATE SET ingested = b.ingested + excluded.ingested;
  RETURN NULL;
END $$;
CREATE TRIGGER metrics_events_inserted AFTER INSERT ON events
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION metrics_events_inserted();

-- A destroyed webhook's roll-ups go with it (deferred, like its usage counters).
CREATE FUNCTION metrics_webhook_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_metric_buckets WHERE webhook_id = OLD.id;
  DELETE FROM webhook_backlog_samples WHERE webhook_id = OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER metrics_webhook_deleted AFTER DELETE ON webhooks DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION metrics_webhook_deleted();
