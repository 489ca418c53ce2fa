-- Hand-written (Prisma's schema language cannot express partitioning).
--
-- delivery_attempts and dlq_entries partitioned by day like the other history tables
-- (migration history_partitions, docs/scaling.md), by range on delivery_id: a delivery's attempts
-- and DLQ entry live in the day of their delivery (ids are 'del_<ULID>', time-ordered), in
-- partitions with the deliveries' own bounds, and retention drops the three days together
-- (src/retention/partitions.ts) instead of deleting attempts and entries in batches first.
--
-- A unique key of a partitioned table must contain the partition key: the primary keys become
-- (delivery_id, id); UNIQUE (delivery_id, number) and UNIQUE (delivery_id), which the results'
-- ON CONFLICT clauses use, hold it already.
--
-- As before, each table becomes the first partition of its new parent (<table>_p0, with the bounds
-- of deliveries_p0) and is not copied: an upgrade builds the new primary key once and moves only
-- the rows of the days after deliveries_p0 (created since history_partitions) to their day. A
-- fresh database runs the same steps on empty tables, so both end with the same catalog.

-- The history tables and the prefix of the ids they are partitioned on; `follows`: the table
-- whose days this one shares (bounds and names), created and dropped with them.
DROP FUNCTION history_partitioned_tables();
CREATE FUNCTION history_partitioned_tables() RETURNS TABLE (tbl text, prefix text, follows text) LANGUAGE sql IMMUTABLE AS $$
  VALUES ('events', 'evt', NULL::text), ('deliveries', 'del', NULL), ('delivery_attempts', 'del', 'deliveries'), ('dlq_entries', 'del', 'deliveries'),
         ('replay_jobs', 'rpl', NULL), ('automation_runs', 'run', NULL), ('audit_logs', 'aud', NULL), ('alert_dispatches', 'ald', NULL)
$$;

-- Creates the daily partitions of every history table from `first_day` for `days` days (UTC), skipping
-- those that exist; a table's day and the days of the tables that follow it are made together or
-- not at all. Safe from several runners at once (a transaction-level advisory lock, and an existing
-- partition is no error). A day whose range is already covered (the first partition reaches to the
-- start of the first migration's next day) or whose rows sit in a DEFAULT partition is skipped:
-- those rows stay where they are. Waits at most lock_wait for a table's lock, then leaves the day
-- to the next run: below PostgreSQL's deadlock_timeout (1 s), so when a writer and this wait on
-- each other, this gives up first and the writer goes on. A new partition takes the storage
-- parameters of its table's DEFAULT partition. Returns the partitions created.
CREATE OR REPLACE FUNCTION history_partitions_ensure(first_day date, days integer, lock_wait text DEFAULT '500ms') RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  t record;
  f record;
  d date;
  part text;
  lo text;
  hi text;
  o text;
  made text[];
BEGIN
  PERFORM pg_advisory_xact_lock(727017);
  PERFORM set_config('lock_timeout', lock_wait, true);
  FOR t IN SELECT * FROM history_partitioned_tables() WHERE follows IS NULL LOOP
    FOR i IN 0..days - 1 LOOP
      d := first_day + i;
      lo := t.prefix || '_' || ulid_time((extract(epoch FROM d::timestamp) * 1000)::bigint);
      hi := t.prefix || '_' || ulid_time((extract(epoch FROM (d + 1)::timestamp) * 1000)::bigint);
      made := '{}';
      BEGIN
        FOR f IN SELECT h.tbl FROM history_partitioned_tables() h WHERE h.tbl = t.tbl OR h.follows = t.tbl ORDER BY h.follows IS NOT NULL, h.tbl LOOP
          part := f.tbl || '_p' || to_char(d, 'YYYYMMDD');
          CONTINUE WHEN to_regclass(part) IS NOT NULL;
          EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, f.tbl, lo, hi);
          FOR o IN SELECT unnest(reloptions) FROM pg_class WHERE oid = to_regclass(f.tbl || '_default') LOOP
            EXECUTE format('ALTER TABLE %I SET (%s)', part, o);
          END LOOP;
          made := made || part;
        END LOOP;
      EXCEPTION
        -- another runner made it (42P07), the range is covered (42P17), a default partition holds
        -- rows of it (23514), or a lock was not granted in time (55P03): nothing to do now.
        WHEN duplicate_table OR invalid_object_definition OR check_violation OR lock_not_available THEN made := '{}';
      END;
      RETURN QUERY SELECT unnest(made);
    END LOOP;
  END LOOP;
END $$;

-- Converts one table that follows `lead` (on delivery_id): the primary key becomes (delivery_id, id),
-- the table is renamed <t>_p0, a parent partitioned by range on delivery_id is made with the same
-- columns, keys, indexes and foreign keys, one partition for each of the lead's (its bounds, its
-- name's day) and a DEFAULT one, then the old table is attached with the bounds of the lead's
-- first partition (its foreign keys are taken over as they are, not checked again).
CREATE FUNCTION pg_temp.history_follow(t text, lead text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  legacy text := t || '_p0';
  first_bound text;
  below text;
  r record;
  s text;
  o text;
  defs text[] := '{}';
BEGIN
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I, ADD CONSTRAINT %I PRIMARY KEY (delivery_id, id)', t, t || '_pkey', t || '_pkey');
  FOR r IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = t::regclass AND contype IN ('p', 'u', 'f') AND conparentid = 0 ORDER BY contype DESC, conname LOOP
    defs := defs || format('ALTER TABLE %I ADD CONSTRAINT %I %s', t, r.conname, r.def);
  END LOOP;
  FOR r IN SELECT indexdef FROM pg_indexes i WHERE i.schemaname = 'public' AND i.tablename = t
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass AND c.conrelid = t::regclass) ORDER BY indexname LOOP
    defs := defs || r.indexdef;
  END LOOP;
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = t::regclass AND NOT tgisinternal) THEN
    RAISE EXCEPTION 'history_follow: % has triggers, which this conversion does not carry over', t;
  END IF;
  EXECUTE format('ALTER TABLE %I RENAME TO %I', t, legacy);
  -- Index names are per schema: the first partition's take a p0_ prefix.
  FOREACH s IN ARRAY ARRAY(SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = legacy::regclass ORDER BY 1) LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', s, left('p0_' || s, 63));
  END LOOP;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING IDENTITY) PARTITION BY RANGE (delivery_id)', t, legacy);
  FOREACH s IN ARRAY defs LOOP EXECUTE s; END LOOP;
  -- The lead's partitions, the first one aside: the same bounds and day.
  FOR r IN SELECT c.relname::text AS name, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = lead::regclass ORDER BY 1 LOOP
    IF r.name = lead || '_p0' THEN
      first_bound := r.bound;
      below := substring(r.bound FROM 'TO \(''(.*)''\)');
      CONTINUE;
    END IF;
    s := t || substr(r.name, length(lead) + 1);
    EXECUTE format('CREATE TABLE %I PARTITION OF %I %s', s, t, r.bound);
    -- Storage parameters (vacuum_truncate = false on delivery_attempts) stay on every partition.
    FOR o IN SELECT unnest(reloptions) FROM pg_class WHERE oid = legacy::regclass LOOP
      EXECUTE format('ALTER TABLE %I SET (%s)', s, o);
    END LOOP;
  END LOOP;
  -- Rows past the first partition's bound (every row once the lead's first partition is gone) move to their day.
  EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %L::text IS NULL OR delivery_id >= %L RETURNING *) INSERT INTO %I SELECT * FROM moved', legacy, below, below, t);
  IF first_bound IS NULL THEN
    EXECUTE format('DROP TABLE %I', legacy);
  ELSE
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I %s', t, legacy, first_bound);
  END IF;
END $$;

SELECT pg_temp.history_follow('delivery_attempts', 'deliveries');
SELECT pg_temp.history_follow('dlq_entries', 'deliveries');
DROP FUNCTION pg_temp.history_follow(text, text);
