-- Automation concurrency slots taken a block at a time (src/automations/slots.ts): a process
-- asks for as many of a project's slots as it has runs waiting, in one statement, and is
-- granted what is free across every runner (fewer than `lim` unexpired leases). The leases are
-- rows of automation_leases as before (one per slot), given back with one DELETE.
-- The advisory lock serialises takers of one project until the (implicit) transaction ends;
-- expired leases (a process that died) are removed first.
CREATE FUNCTION automation_leases_take(project text, ids text[], lim int, ttl_ms int) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  taken int;
  granted text[];
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('automation-concurrency:' || project, 0));
  DELETE FROM automation_leases WHERE project_id = project AND expires_at <= now();
  SELECT count(*) INTO taken FROM automation_leases WHERE project_id = project;
  IF taken >= lim OR cardinality(ids) = 0 THEN
    RETURN ARRAY[]::text[];
  END IF;
  granted := ids[1:LEAST(cardinality(ids), lim - taken)];
  INSERT INTO automation_leases (id, project_id, expires_at)
  SELECT g, project, now() + make_interval(secs => ttl_ms::float8 / 1000) FROM unnest(granted) AS g;
  RETURN granted;
END $$;

-- The one-slot form is replaced by the block function (a block of one).
DROP FUNCTION automation_lease_take(text, text, int, int);
