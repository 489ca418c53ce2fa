// Time-partitioned history (CONTRACT §14, src/retention/partitions.ts) on a real PostgreSQL: the
// migration (fresh and upgraded with data end the same), the partition job (idempotent across
// runners, a row past the days created lands in the default partition), partition-dropping
// retention, and partition pruning of the hot paths' lookups by id.
import pg from 'pg';
import { ulid } from 'ulid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations } from '../src/db/migrate.ts';
import { ensureHistoryPartitions, HISTORY_PARTITIONED, listHistoryPartitions } from '../src/retention/partitions.ts';
import { runRetention } from '../src/retention/run.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createTestDatabase, serverUrl } from './support/database.ts';

const DAY = 86_400_000;
const MIGRATION = '20261126223000_history_partitions';
/** delivery_attempts and dlq_entries partitioned like deliveries. */
const FOLLOWING = '20261127003540_history_partitions_attempts_dlq';
const ids = new Map<string, string>();
/** The id of `prefix` made at `ms` (the same one each time it is asked for). */
const idAt = (prefix: string, ms: number) => {
  const key = `${prefix}:${ms}`;
  if (!ids.has(key)) ids.set(key, `${prefix}_${ulid(ms).toLowerCase()}`);
  return ids.get(key)!;
};
const dayOf = (ms: number) => Math.floor(ms / DAY) * DAY;
const stamp = (ms: number) => new Date(ms).toISOString().slice(0, 10).replace(/-/g, '');

async function emptyDatabase(): Promise<string> {
  const name = `test_hp_${Math.random().toString(16).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(serverUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

/** Columns, indexes, constraints, triggers and partitioning of the tables that are not partitions. */
async function catalog(c: pg.Client) {
  const q = async (sql: string) => (await c.query(sql)).rows;
  const notPartition = `NOT EXISTS (SELECT 1 FROM pg_class pc WHERE pc.relname = %s AND pc.relnamespace = 'public'::regnamespace AND pc.relispartition)`;
  return {
    columns: await q(`SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns
                       WHERE table_schema = 'public' AND table_name <> '_prisma_migrations' AND ${notPartition.replace('%s', 'table_name')} ORDER BY 1, 2`),
    indexes: await q(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_prisma_migrations'
                       AND ${notPartition.replace('%s', 'tablename')} ORDER BY 1, 2`),
    constraints: await q(`SELECT conrelid::regclass::text AS t, conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
                           WHERE connamespace = 'public'::regnamespace AND conrelid <> 0 AND NOT (SELECT relispartition FROM pg_class WHERE oid = conrelid)
                             AND conrelid::regclass::text <> '_prisma_migrations' ORDER BY 1, 2`),
    triggers: await q(`SELECT tgrelid::regclass::text AS t, tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger
                        WHERE NOT tgisinternal AND NOT (SELECT relispartition FROM pg_class WHERE oid = tgrelid) ORDER BY 1, 2`),
    partitioned: await q(`SELECT partrelid::regclass::text AS t, partstrat, pg_get_partkeydef(partrelid) AS key FROM pg_partitioned_table ORDER BY 1`),
    partitions: await q(`SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound, c.reloptions FROM pg_class c
                          WHERE c.relispartition AND c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' ORDER BY 1`),
  };
}

describe('history partitions: the migration', () => {
  it('a database upgraded with rows in it ends like a fresh one, its rows kept', async () => {
    const fresh = new pg.Client({ connectionString: await createTestDatabase() });
    const upgraded = new pg.Client({ connectionString: await emptyDatabase() });
    await fresh.connect();
    await upgraded.connect();
    try {
      const migrations = await listMigrations();
      const at = migrations.findIndex((m) => m.name === MIGRATION);
      expect(at).toBeGreaterThan(0);
      for (const m of migrations.slice(0, at)) await upgraded.query(m.sql);
      // Rows of every partitioned table (and those pointing at them), some days old, one with an id of no day.
      const now = Date.now();
      const t = now - 3 * DAY;
      await upgraded.query(`
        INSERT INTO projects (id, name, updated_at) VALUES ('prj_1', 'p', now());
        INSERT INTO webhooks (id, project_id, public_id, retry_policy, updated_at) VALUES ('wh_1', 'prj_1', 'pub_1', '{}', now());
        INSERT INTO events (id, project_id, webhook_id, channel, body, body_size) VALUES ('${idAt('evt', t)}', 'prj_1', 'wh_1', 'http', '\\x7b7d', 2),
          ('${idAt('evt', now)}', 'prj_1', 'wh_1', 'http', '\\x7b7d', 2), ('zz_odd', 'prj_1', 'wh_1', 'http', NULL, 0);
        INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) VALUES
          ('${idAt('del', t)}', 'prj_1', 'wh_1', '${idAt('evt', t)}', '{}', 'succeeded'), ('${idAt('del', now)}', 'prj_1', 'wh_1', '${idAt('evt', now)}', '{}', 'queued');
        INSERT INTO delivery_attempts (id, delivery_id, number, started_at, outcome) VALUES ('${idAt('att', t)}', '${idAt('del', t)}', 1, now(), 'succeeded');
        INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ('${idAt('dlq', t)}', 'prj_1', 'wh_1', '${idAt('del', t)}', 'x');
        INSERT INTO replay_jobs (id, project_id, kind) VALUES ('${idAt('rpl', t)}', 'prj_1', 'single');
        INSERT INTO audit_logs (id, project_id, actor, action, target_type) VALUES ('${idAt('aud', t)}', 'prj_1', 'a', 'b', 'c');
        INSERT INTO automations (id, project_id, name, updated_at) VALUES ('aut_1', 'prj_1', 'a', now());
        INSERT INTO automation_runs (id, project_id, automation_id, version, status, cpu_ms, subrequests, logs, log_bytes, logs_truncated)
          VALUES ('${idAt('run', t)}', 'prj_1', 'aut_1', 1, 'ok', 1, 0, '', 0, false);
        INSERT INTO alert_dispatches (id, project_id, rule_id, state, value, channels) VALUES ('${idAt('ald', t)}', 'prj_1', 'alr_1', 'firing', 1, '[]');`);
      const counters = `SELECT metric, sum(value)::int AS v FROM usage_counters WHERE webhook_id = '' GROUP BY 1 ORDER BY 1`;
      let before = (await upgraded.query(counters)).rows;
      const rows = `SELECT 'events' AS t, id FROM events UNION ALL SELECT 'deliveries', id FROM deliveries UNION ALL SELECT 'attempts', id FROM delivery_attempts
                    UNION ALL SELECT 'replay', id FROM replay_jobs UNION ALL SELECT 'audit', id FROM audit_logs UNION ALL SELECT 'runs', id FROM automation_runs
                    UNION ALL SELECT 'alerts', id FROM alert_dispatches UNION ALL SELECT 'dlq', id FROM dlq_entries ORDER BY 1, 2`;
      let rowsBefore = (await upgraded.query(rows)).rows;
      await upgraded.query('BEGIN');
      await upgraded.query(migrations[at].sql);
      await upgraded.query('COMMIT');
      const tomorrow = now + DAY;
      expect(migrations.findIndex((m) => m.name === FOLLOWING)).toBeGreaterThan(at);
      for (const m of migrations.slice(at + 1)) {
        if (m.name === FOLLOWING) {
          // A delivery in a day of its own (made by the first partitioning migration), with its
          // attempt and DLQ entry: the second one moves those to the day's partitions.
          expect((await upgraded.query(rows)).rows).toEqual(rowsBefore);
          await upgraded.query(`
            INSERT INTO events (id, project_id, webhook_id, channel, body_size) VALUES ('${idAt('evt', tomorrow)}', 'prj_1', 'wh_1', 'http', 0);
            INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) VALUES ('${idAt('del', tomorrow)}', 'prj_1', 'wh_1', '${idAt('evt', tomorrow)}', '{}', 'failed');
            INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, outcome) VALUES ('${idAt('att', tomorrow)}', 'prj_1', '${idAt('del', tomorrow)}', 1, now(), 'failed');
            INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ('${idAt('dlq', tomorrow)}', 'prj_1', 'wh_1', '${idAt('del', tomorrow)}', 'x');`);
          rowsBefore = (await upgraded.query(rows)).rows;
          before = (await upgraded.query(counters)).rows;
        }
        await upgraded.query(m.sql);
      }

      expect(await catalog(upgraded)).toEqual(await catalog(fresh));
      expect((await upgraded.query(rows)).rows).toEqual(rowsBefore);
      expect((await upgraded.query(counters)).rows).toEqual(before);
      // The old rows sit in the first partition, the id of no day in the default one.
      expect((await upgraded.query(`SELECT tableoid::regclass::text AS p FROM events ORDER BY id`)).rows.map((r) => r.p)).toEqual(['events_p0', 'events_p0', `events_p${stamp(tomorrow)}`, 'events_default']);
      // A delivery's attempts and DLQ entries are in the partitions of its day.
      expect(
        (
          await upgraded.query(`SELECT d.tableoid::regclass::text AS d, a.tableoid::regclass::text AS a, x.tableoid::regclass::text AS x
                                  FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id JOIN dlq_entries x ON x.delivery_id = d.id ORDER BY d.id`)
        ).rows,
      ).toEqual([
        { d: 'deliveries_p0', a: 'delivery_attempts_p0', x: 'dlq_entries_p0' },
        { d: `deliveries_p${stamp(tomorrow)}`, a: `delivery_attempts_p${stamp(tomorrow)}`, x: `dlq_entries_p${stamp(tomorrow)}` },
      ]);
      // The moved attempt has its project, like the one the column was filled for.
      expect((await upgraded.query(`SELECT DISTINCT project_id FROM delivery_attempts`)).rows).toEqual([{ project_id: 'prj_1' }]);
      // Foreign keys hold across the partitioned tables: a delivery's cascade takes its attempts.
      await upgraded.query(`DELETE FROM events WHERE id = '${idAt('evt', t)}'`);
      expect((await upgraded.query(`SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id = $1`, [idAt('del', t)])).rows[0].n).toBe(0);
      await expect(upgraded.query(`INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, outcome) VALUES ('att_x', 'prj_1', 'del_none', 1, now(), 'failed')`)).rejects.toThrow(/foreign key/);
      await expect(upgraded.query(`INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) VALUES ('del_x', 'prj_1', 'wh_1', 'evt_none', '{}', 'queued')`)).rejects.toThrow(/foreign key/);
    } finally {
      await fresh.end();
      await upgraded.end();
    }
  });
});

describe('history partitions: the job and retention', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.stop();
  });
  const q = (sql: string, values: unknown[] = []) => app.rt.db.pool.query(sql, values).then((r) => r.rows);

  it('creates today and the days ahead; two runners at once both succeed, and make each partition once', async () => {
    const names = (await listHistoryPartitions(app.rt.db.pool)).map((p) => p.name);
    const today = new Date().toISOString().slice(0, 10).replace(/-/g, '');
    const tomorrow = new Date(Date.now() + DAY).toISOString().slice(0, 10).replace(/-/g, '');
    const in3 = new Date(Date.now() + 3 * DAY).toISOString().slice(0, 10).replace(/-/g, '');
    // Today is in the migration's first partition; the days after it are their own.
    expect(names).toEqual(expect.arrayContaining(HISTORY_PARTITIONED.flatMap((t) => [`${t.table}_p0`, `${t.table}_p${tomorrow}`, `${t.table}_p${in3}`])));
    expect(names).not.toContain(`events_p${today}`);
    const later = new Date(Date.now() + 30 * DAY);
    const [a, b] = await Promise.all([ensureHistoryPartitions(app.rt.db.pool, later), ensureHistoryPartitions(app.rt.db.pool, later)]);
    expect([...a, ...b].sort()).toEqual(HISTORY_PARTITIONED.flatMap((t) => [0, 1, 2, 3, 4].map((d) => `${t.table}_p${new Date(later.getTime() + d * DAY).toISOString().slice(0, 10).replace(/-/g, '')}`)).sort());
    expect(await ensureHistoryPartitions(app.rt.db.pool, later)).toEqual([]);
  });

  it('a row past the days created lands in the default partition; the job then skips its day instead of failing', async () => {
    const { projectId } = await app.project('free');
    const wh = 'wh_' + ulid().toLowerCase();
    await q(`INSERT INTO webhooks (id, project_id, public_id, retry_policy, updated_at) VALUES ($1, $2, $1, '{}', now())`, [wh, projectId]);
    const far = Date.now() + 100 * DAY;
    await q(`INSERT INTO events (id, project_id, webhook_id, channel, body_size) VALUES ($1, $2, $3, 'http', 0)`, [idAt('evt', far), projectId, wh]);
    expect((await q(`SELECT tableoid::regclass::text AS p FROM events WHERE id = $1`, [idAt('evt', far)]))[0].p).toBe('events_default');
    const made = await ensureHistoryPartitions(app.rt.db.pool, new Date(far));
    expect(made).not.toContain(`events_p${new Date(far).toISOString().slice(0, 10).replace(/-/g, '')}`);
    expect(made).toContain(`deliveries_p${new Date(far).toISOString().slice(0, 10).replace(/-/g, '')}`);
    await q(`DELETE FROM events WHERE id = $1`, [idAt('evt', far)]);
  });

  it("makes a day of deliveries with its attempts' and DLQ entries' day or not at all; the next run makes the three", async () => {
    const day = Date.now() + 60 * DAY;
    const three = ['deliveries', 'delivery_attempts', 'dlq_entries'].map((t) => `${t}_p${stamp(day)}`);
    const holder = await app.rt.db.pool.connect();
    try {
      // A lock on dlq_entries not given up within the job's wait: its day cannot be made.
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE dlq_entries IN ACCESS SHARE MODE');
      const made = await ensureHistoryPartitions(app.rt.db.pool, new Date(day), 1);
      expect(made).toContain(`events_p${stamp(day)}`);
      expect(made.filter((n) => three.includes(n))).toEqual([]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await ensureHistoryPartitions(app.rt.db.pool, new Date(day), 1)).toEqual(three);
  });

  it('retention drops a day past every project retention, and keeps a day a longer retention still needs, deleting only its expired rows', async () => {
    // Two days ahead of the migration's first partition, so they are days of their own.
    const day1 = dayOf(Date.now()) + 40 * DAY + 3_600_000;
    const day2 = day1 + DAY;
    await ensureHistoryPartitions(app.rt.db.pool, new Date(day1), 2);
    const free = await app.project('free'); // 7 days of history
    const long = await app.project('enterprise'); // 20 days, below
    await q(`UPDATE projects SET custom_quotas = '{"history_retention_seconds": 1728000}' WHERE id = $1`, [long.projectId]);
    const seed = async (projectId: string, t: number, status = 'succeeded') => {
      const wh = (await q(`SELECT id FROM webhooks WHERE project_id = $1`, [projectId]))[0]?.id ?? 'wh_' + ulid().toLowerCase();
      await q(`INSERT INTO webhooks (id, project_id, public_id, retry_policy, updated_at) VALUES ($1, $2, $1, '{}', now()) ON CONFLICT DO NOTHING`, [wh, projectId]);
      const [evt, del] = [idAt('evt', t), idAt('del', t)];
      await q(`INSERT INTO events (id, project_id, webhook_id, channel, body, body_size) VALUES ($1, $2, $3, 'http', '\\x7b7d', 2)`, [evt, projectId, wh]);
      await q(`INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) VALUES ($1, $2, $3, $4, '{}', $5)`, [del, projectId, wh, evt, status]);
      await q(`INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, outcome) VALUES ($1, $3, $2, 1, now(), 'succeeded')`, [idAt('att', t), del, projectId]);
      await q(`INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ($1, $2, $3, $4, 'x')`, [idAt('dlq', t), projectId, wh, del]);
      await q(`INSERT INTO audit_logs (id, project_id, actor, action, target_type) VALUES ($1, $2, 'a', 'b', 'c')`, [idAt('aud', t), projectId]);
      return { evt, del };
    };
    // Day 1: only the free project's rows; day 2: both projects'.
    const d1 = await Promise.all([seed(free.projectId, day1), seed(free.projectId, day1 + 60_000)]);
    const d2free = await seed(free.projectId, day2);
    const d2long = await seed(long.projectId, day2 + 60_000);
    const partOf = async (table: string, id: string, key = 'id') => (await q(`SELECT tableoid::regclass::text AS p FROM ${table} WHERE ${key} = $1`, [id]))[0]?.p;
    expect(await partOf('deliveries', d2long.del)).toBe(`deliveries_p${stamp(day2)}`);
    expect(await partOf('delivery_attempts', d2long.del, 'delivery_id')).toBe(`delivery_attempts_p${stamp(day2)}`);
    expect(await partOf('dlq_entries', d2long.del, 'delivery_id')).toBe(`dlq_entries_p${stamp(day2)}`);

    // Past the free project's 7 days for both days, within the long one's 20 for both: nothing is dropped
    // (the longest retention decides), the free project's rows go by batches.
    const r1 = await runRetention(app.rt, { now: new Date(day2 + DAY + 8 * DAY) });
    expect(r1.partitionsDropped.filter((n) => n.endsWith(stamp(day1)) || n.endsWith(stamp(day2)))).toEqual([]);
    expect(r1.deliveriesDeleted).toBe(3);
    expect(await q(`SELECT id FROM deliveries WHERE id = ANY($1)`, [[...d1.map((d) => d.del), d2free.del, d2long.del]])).toEqual([{ id: d2long.del }]);
    expect(await partOf('events', d2long.evt)).toBe(`events_p${stamp(day2)}`);

    // The long project's day 2 delivery is new again on day 1 (moved there: an unfinished one keeps its day).
    await seed(long.projectId, day1 + 120_000, 'retrying');
    // Past 20 days after day 2: day 2 goes whole (deliveries with their attempts and DLQ entries,
    // events, audit logs); day 1 stays for its unfinished delivery.
    const r2 = await runRetention(app.rt, { now: new Date(day2 + DAY + 21 * DAY) });
    const dayOfDeliveries = (ms: number) => ['deliveries', 'delivery_attempts', 'dlq_entries'].map((t) => `${t}_p${stamp(ms)}`);
    expect(r2.partitionsDropped).toEqual(expect.arrayContaining([...dayOfDeliveries(day2), `events_p${stamp(day2)}`, `audit_logs_p${stamp(day2)}`]));
    expect(r2.partitionsDropped.filter((n) => dayOfDeliveries(day1).includes(n) || n === `events_p${stamp(day1)}`)).toEqual([]);
    expect(await q(`SELECT id FROM deliveries WHERE id = $1`, [d2long.del])).toEqual([]);
    expect(await q(`SELECT 1 FROM delivery_attempts WHERE delivery_id = $1`, [d2long.del])).toEqual([]);
    expect(await q(`SELECT 1 FROM dlq_entries WHERE delivery_id = $1`, [d2long.del])).toEqual([]);
    const names = (await listHistoryPartitions(app.rt.db.pool)).map((p) => p.name);
    expect(names.filter((n) => dayOfDeliveries(day2).includes(n))).toEqual([]);
    expect(names).toEqual(expect.arrayContaining(dayOfDeliveries(day1)));
    // The partition job does not bring a dropped day back unless asked for it.
    await ensureHistoryPartitions(app.rt.db.pool);
    expect((await listHistoryPartitions(app.rt.db.pool)).map((p) => p.name)).not.toContain(`deliveries_p${stamp(day2)}`);
  });

  it("the delivery engine's statements by id read one partition of deliveries and of events (one id: also in a generic plan; an array of ids: in the custom plans they get)", async () => {
    const { projectId } = await app.project('free');
    const wh = 'wh_' + ulid().toLowerCase();
    await q(`INSERT INTO webhooks (id, project_id, public_id, retry_policy, updated_at) VALUES ($1, $2, $1, '{}', now())`, [wh, projectId]);
    const [evt, del] = [idAt('evt', Date.now() + DAY + 1), idAt('del', Date.now() + DAY + 1)];
    await q(`INSERT INTO events (id, project_id, webhook_id, channel, body_size) VALUES ($1, $2, $3, 'http', 0)`, [evt, projectId, wh]);
    await q(`INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) VALUES ($1, $2, $3, $4, '{}', 'queued')`, [del, projectId, wh, evt]);
    const client = await app.rt.db.pool.connect();
    try {
      await client.query(`SET plan_cache_mode = force_generic_plan`);
      // The join to events by a delivery's event_id: on these few-row tables (analyzed while empty)
      // the planner would hash or scan all of events; with real sizes it takes a nested loop over
      // events' index, as here.
      await client.query(`SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_seqscan = off`);
      const scanned = async (name: string, sql: string, args: string) => {
        await client.query(`PREPARE ${name} AS ${sql}`);
        const plan = (await client.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE ${name}(${args})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
        await client.query(`DEALLOCATE ${name}`);
        // Partition scans that ran (run-time pruning leaves the others out, or "never executed").
        const ran = plan.split('\n').filter((l) => /on (events|deliveries)_(p\d+|p0|default)/.test(l) && !/never executed/.test(l)).map((l) => /on ((events|deliveries)_\w+)/.exec(l)![1]);
        return { plan, ran: [...new Set(ran)].sort() };
      };
      // claim.ts's read of one delivery with its event and webhook.
      const claim = await scanned('c1', `SELECT d.*, e.body FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN events e ON e.id = d.event_id WHERE d.id = $1`, `'${del}'`);
      expect(claim.ran, claim.plan).toHaveLength(2);
      // claim-batch.ts's and record.ts's form, ids in an array: PostgreSQL prunes `id = ANY($1)` only
      // in a custom plan (the array known), which is what their named statements get while a generic
      // plan would probe every partition's key (docs/scaling.md).
      await client.query(`SET plan_cache_mode = force_custom_plan`);
      const batch = await scanned('c2', `UPDATE deliveries d SET updated_at = now() WHERE d.id = ANY($1::text[]) RETURNING d.id`, `ARRAY['${del}']`);
      expect(batch.ran, batch.plan).toHaveLength(1);
    } finally {
      await client.query('RESET plan_cache_mode; RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_seqscan');
      client.release();
    }
  });

  it("the hot paths' lookups by id read one partition (pruning)", async () => {
    const plan = async (sql: string, values: unknown[]) => (await q(`EXPLAIN ${sql}`, values)).map((r) => r['QUERY PLAN']).join('\n');
    const id = idAt('del', Date.now() + DAY + 60_000);
    const p = await plan(`SELECT * FROM deliveries WHERE id = $1`, [id]);
    expect(p).toMatch(/deliveries_p\d{8}/);
    expect(p).not.toMatch(/deliveries_default|deliveries_p0/);
    const e = await plan(`UPDATE events SET payload_purged_at = now() WHERE id = $1`, [idAt('evt', Date.now() + DAY)]);
    expect(new Set(e.match(/events_p\d+|events_default/g))).toHaveProperty('size', 1);
    // A delivery's attempts (their listing) and its DLQ entry (a re-drive's row lock): the partition of its day.
    const day = stamp(Date.now() + DAY + 60_000);
    const a = await plan(`SELECT * FROM delivery_attempts WHERE delivery_id = $1 ORDER BY number`, [id]);
    expect(new Set(a.match(/delivery_attempts_(p\d+|default)/g))).toEqual(new Set([`delivery_attempts_p${day}`]));
    const x = await plan(`SELECT redriven_at FROM dlq_entries WHERE delivery_id = $1 AND id = $2 FOR UPDATE`, [id, idAt('dlq', Date.now())]);
    expect(new Set(x.match(/dlq_entries_(p\d+|default)/g))).toEqual(new Set([`dlq_entries_p${day}`]));
  });
});
