-- Hand-written (Prisma's schema language cannot express partitioning).
--
-- Time-partitioned history (CONTRACT §14, docs/scaling.md): the tables that grow with traffic and
-- whose primary key is their ULID id alone become PostgreSQL range-partitioned tables on that id,
-- one partition per UTC day ('evt_<ULID time of 00:00>' to 'evt_<ULID time of the next 00:00>').
-- Ids are time-ordered, so every primary key, index and foreign key stays as it was; retention
-- drops a whole day once every project's history retention has passed it (src/retention/partitions.ts).
--
-- Each existing table becomes the first partition of its new parent (renamed <table>_p0, range
-- MINVALUE up to the start of tomorrow): no row is copied, so an upgrade of a large database is one
-- scan per table (the range check). A fresh database runs the same steps on empty tables, so both
-- end with the same parents, indexes, constraints and triggers. Every table gets a DEFAULT
-- partition: an insert past the partitions created ahead lands there and never fails.
--
-- delivery_attempts (UNIQUE (delivery_id, number)) and dlq_entries (UNIQUE (delivery_id)) are not
-- partitioned: a unique key must contain the partition key, so they would need new keys.

-- The 10-character ULID time of `ms` (Crockford base32, lower-cased like the ids).
CREATE FUNCTION ulid_time(ms bigint) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  alphabet constant text := '0123456789abcdefghjkmnpqrstvwxyz';
  r text := '';
BEGIN
  FOR i IN 1..10 LOOP
    r := substr(alphabet, (ms % 32)::int + 1, 1) || r;
    ms := ms / 32;
  END LOOP;
  RETURN r;
END $$;

-- The partitioned history tables and their ids' prefixes.
CREATE FUNCTION history_partitioned_tables() RETURNS TABLE (tbl text, prefix text) LANGUAGE sql IMMUTABLE AS $$
  VALUES ('events', 'evt'), ('deliveries', 'del'), ('replay_jobs', 'rpl'), ('automation_runs', 'run'),
         ('audit_logs', 'aud'), ('alert_dispatches', 'ald')
$$;

-- Creates the daily partitions of every history table from `first_day` for `days` days (UTC), skipping
-- those that exist. Safe from several runners at once (a transaction-level advisory lock, and an
-- existing partition is no error). A day whose range is already covered (the first partition
-- reaches to the start of the migration's next day) or whose rows sit in the DEFAULT partition is
-- skipped: those rows stay where they are. Waits at most lock_wait for a table's lock, then leaves
-- the day to the next run: below PostgreSQL's deadlock_timeout (1 s), so when a writer and this
-- wait on each other, this gives up first and the writer goes on. Returns the partitions created.
CREATE FUNCTION history_partitions_ensure(first_day date, days integer, lock_wait text DEFAULT '500ms') RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  t record;
  d date;
  part text;
  lo text;
  hi text;
BEGIN
  PERFORM pg_advisory_xact_lock(727017);
  PERFORM set_config('lock_timeout', lock_wait, true);
  FOR t IN SELECT * FROM history_partitioned_tables() LOOP
    FOR i IN 0..days - 1 LOOP
      d := first_day + i;
      part := t.tbl || '_p' || to_char(d, 'YYYYMMDD');
      CONTINUE WHEN to_regclass(part) IS NOT NULL;
      lo := t.prefix || '_' || ulid_time((extract(epoch FROM d::timestamp) * 1000)::bigint);
      hi := t.prefix || '_' || ulid_time((extract(epoch FROM (d + 1)::timestamp) * 1000)::bigint);
      BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, t.tbl, lo, hi);
        IF t.tbl IN ('events', 'deliveries') THEN
          EXECUTE format('ALTER TABLE %I SET (vacuum_truncate = false)', part);
        END IF;
        RETURN NEXT part;
      EXCEPTION
        -- another runner made it (42P07), the range is covered (42P17), the default partition holds
        -- rows of it (23514), or the lock was not granted in time (55P03): nothing to do now.
        WHEN duplicate_table OR invalid_object_definition OR check_violation OR lock_not_available THEN NULL;
      END;
    END LOOP;
  END LOOP;
END $$;

-- Converts one table: its foreign keys and triggers are taken off, the table renamed <t>_p0, a
-- partitioned parent made with the same columns, keys, indexes and triggers, and the old table
-- attached as its first partition.
CREATE FUNCTION pg_temp.history_convert(t text, prefix text, bound_day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  legacy text := t || '_p0';
  bound text := prefix || '_' || ulid_time((extract(epoch FROM bound_day::timestamp) * 1000)::bigint);
  r record;
  con text[] := '{}';
  idx text[] := '{}';
  trg text[] := '{}';
  s text;
BEGIN
  FOR r IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = t::regclass AND contype IN ('p', 'u') ORDER BY conname LOOP
    con := con || format('ALTER TABLE %I ADD CONSTRAINT %I %s', t, r.conname, r.def);
  END LOOP;
  FOR r IN SELECT indexdef FROM pg_indexes i WHERE i.schemaname = 'public' AND i.tablename = t
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass AND c.conrelid = t::regclass) ORDER BY indexname LOOP
    idx := idx || r.indexdef;
  END LOOP;
  FOR r IN SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = t::regclass AND NOT tgisinternal ORDER BY tgname LOOP
    trg := trg || r.def;
    EXECUTE format('DROP TRIGGER %I ON %I', r.tgname, t);
  END LOOP;
  EXECUTE format('ALTER TABLE %I RENAME TO %I', t, legacy);
  -- Index names are per schema: the first partition's take a p0_ prefix.
  FOREACH s IN ARRAY ARRAY(SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = legacy::regclass ORDER BY 1) LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', s, left('p0_' || s, 63));
  END LOOP;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING IDENTITY) PARTITION BY RANGE (id)', t, legacy);
  FOREACH s IN ARRAY con LOOP EXECUTE s; END LOOP;
  FOREACH s IN ARRAY idx LOOP EXECUTE s; END LOOP;
  -- A sequence owned by a column (deliveries.seq) follows the parent's column.
  FOR r IN SELECT d.objid::regclass::text AS seq, a.attname FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
            WHERE d.refobjid = legacy::regclass AND d.classid = 'pg_class'::regclass AND d.deptype = 'a' AND d.refobjsubid > 0
              AND (SELECT relkind FROM pg_class WHERE oid = d.objid) = 'S' LOOP
    EXECUTE format('ALTER SEQUENCE %s OWNED BY %I.%I', r.seq, t, r.attname);
  END LOOP;
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t || '_default', t);
  -- Storage parameters (vacuum_truncate = false on events and deliveries) stay on every partition.
  FOR r IN SELECT unnest(reloptions) AS o FROM pg_class WHERE oid = legacy::regclass LOOP
    EXECUTE format('ALTER TABLE %I SET (%s)', t || '_default', r.o);
  END LOOP;
  -- Rows of the old table at or past the bound (ids not of this table's form) move to their partition.
  EXECUTE format('WITH moved AS (DELETE FROM %I WHERE id >= %L RETURNING *) INSERT INTO %I SELECT * FROM moved', legacy, bound, t);
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', t, legacy, bound);
  FOREACH s IN ARRAY trg LOOP EXECUTE s; END LOOP;
END $$;

DO $$
DECLARE
  tomorrow date := (now() AT TIME ZONE 'UTC')::date + 1;
  fks text[] := '{}';
  r record;
  s text;
BEGIN
  -- Foreign keys from and to the converted tables, made again on the parents at the end.
  FOR r IN SELECT c.conname, c.conrelid::regclass::text AS tbl, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
            WHERE c.contype = 'f' AND c.conparentid = 0
              AND (c.conrelid::regclass::text IN (SELECT tbl FROM history_partitioned_tables()) OR c.confrelid::regclass::text IN (SELECT tbl FROM history_partitioned_tables()))
            ORDER BY 2, 1 LOOP
    fks := fks || format('ALTER TABLE %I ADD CONSTRAINT %I %s', r.tbl, r.conname, r.def);
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', r.tbl, r.conname);
  END LOOP;
  FOR r IN SELECT * FROM history_partitioned_tables() LOOP
    PERFORM pg_temp.history_convert(r.tbl, r.prefix, tomorrow);
  END LOOP;
  FOREACH s IN ARRAY fks LOOP EXECUTE s; END LOOP;
  -- Tomorrow and the days after it (the partition job keeps creating them ahead).
  PERFORM history_partitions_ensure(tomorrow, 4);
END $$;

DROP FUNCTION pg_temp.history_convert(text, text, date);
