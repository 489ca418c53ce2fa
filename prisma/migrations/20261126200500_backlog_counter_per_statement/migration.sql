-- Hand-written (Prisma's schema language cannot express triggers).
--
-- The backlog counter followed a delivery's move between active and terminal states with a
-- row-level trigger: the statement that records a batch of results ran one INSERT … ON CONFLICT
-- per finished delivery and counter row (two per delivery). Now one statement-level trigger sums
-- the statement's moves per project and webhook and writes each counter row once. Transition
-- tables cannot go with a column list (UPDATE OF status), so it sees every UPDATE of deliveries;
-- the join finds no move in the ones that leave status alone (claims change it only between
-- active states).
DROP TRIGGER usage_delivery_status_changed ON deliveries;
DROP FUNCTION usage_delivery_status_changed();

CREATE FUNCTION usage_deliveries_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT c.project_id, c.webhook_id, 'backlog_depth', 'current', usage_counter_shard(), sum(c.delta)
  FROM (
    SELECT n.project_id, n.webhook_id, CASE WHEN delivery_is_active(n.status) THEN 1 ELSE -1 END AS delta
      FROM new_rows n JOIN old_rows o ON o.id = n.id
     WHERE delivery_is_active(o.status) IS DISTINCT FROM delivery_is_active(n.status)
  ) d
  CROSS JOIN LATERAL (VALUES (d.project_id, ''::text, d.delta), (d.project_id, d.webhook_id, d.delta)) AS c(project_id, webhook_id, delta)
  GROUP BY 1, 2 HAVING sum(c.delta) <> 0 ORDER BY 1, 2
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value;
  RETURN NULL;
END $$;

CREATE TRIGGER usage_deliveries_updated AFTER UPDATE ON deliveries
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_deliveries_updated();
