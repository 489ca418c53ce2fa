// Measures what docs/scaling.md reports of time-partitioned history: the time to drop a day of N
// deliveries (and their events) as retention does it, and the ingest-like statement's latency
// (an event and its delivery in one transaction, from 8 concurrent clients) before, while the day
// is dropped, and while rows are deleted in retention's batches of 500 instead.
//   npx tsx scripts/measure-partition-drop.ts [deliveries=1000000]
// On DATABASE_URL when set, else a throwaway embedded cluster.
import pg from 'pg';
import { migrate } from '../src/db/migrate.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { newId } from '../src/ids.ts';
import { encodeTime } from 'ulid';
import { droppedWith, dropHistoryPartition, ensureHistoryPartitions, listHistoryPartitions } from '../src/retention/partitions.ts';
import { withDatabase } from './with-database.ts';

const N = Number(process.argv[2] ?? 1_000_000);
const BATCH_ROWS = Math.min(300_000, N);
const DAY = 86_400_000;

await withDatabase(async (server) => {
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  const name = `measure_${Date.now()}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(server);
  u.pathname = `/${name}`;
  const url = u.toString();
  await migrate(url, [ATTEMPT_TASK]);
  const db = new pg.Pool({ connectionString: url, max: 12 });
  await db.query(`INSERT INTO projects (id, name, updated_at) VALUES ('prj_m', 'm', now());
    INSERT INTO webhooks (id, project_id, public_id, retry_policy, updated_at) VALUES ('wh_m', 'prj_m', 'pub_m', '{}', now());`);
  // Two days well ahead (so no retention of today's rows is involved): D is dropped whole, D2 deleted by batches.
  const dayD = Math.floor(Date.now() / DAY) * DAY + 20 * DAY;
  const dayD2 = dayD + DAY;
  await ensureHistoryPartitions(db, new Date(dayD), 2);
  const fill = async (day: number, n: number) => {
    const t0 = Date.now();
    for (let from = 0; from < n; from += 100_000) {
      const to = Math.min(n, from + 100_000);
      // Ids: the day's ULID time of row i, then 16 characters of its own.
      await db.query(
        `WITH r AS (SELECT i, ulid_time($1::bigint + (i::bigint * 86_000_000 / $3)) || lpad(to_hex(i), 16, '0') AS u FROM generate_series($2::int, $4::int - 1) i),
              e AS (INSERT INTO events (id, project_id, webhook_id, channel, body_size, received_at) SELECT 'evt_' || u, 'prj_m', 'wh_m', 'http', 0, now() FROM r)
         INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status, completed_at)
         SELECT 'del_' || u, 'prj_m', 'wh_m', 'evt_' || u, '{"type":"webhook","url":"http://127.0.0.1:9/"}', 'succeeded', now() FROM r`,
        [day, from, n, to],
      );
    }
    await db.query('VACUUM ANALYZE events');
    await db.query('VACUUM ANALYZE deliveries');
    return Date.now() - t0;
  };
  console.log(`filling day D with ${N} events + deliveries, day D2 with ${BATCH_ROWS}…`);
  console.log(`  filled D in ${await fill(dayD, N)} ms, D2 in ${await fill(dayD2, BATCH_ROWS)} ms`);

  // The ingest-like load: 8 clients, each an event and its delivery in one transaction, back to back.
  let stop = false;
  const lat: { at: number; ms: number }[] = [];
  const client = async () => {
    while (!stop) {
      const id = newId('x').slice(2);
      const t = performance.now();
      await db.query(
        `WITH e AS (INSERT INTO events (id, project_id, webhook_id, channel, body, body_size) VALUES ('evt_' || $1, 'prj_m', 'wh_m', 'http', '\\x7b7d', 2) RETURNING id)
         INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status) SELECT 'del_' || $1, 'prj_m', 'wh_m', id, '{}', 'succeeded' FROM e`,
        [id],
      );
      lat.push({ at: performance.now(), ms: performance.now() - t });
    }
  };
  const load = Array.from({ length: 8 }, client);
  const p99 = (from: number, to: number) => {
    const xs = lat.filter((l) => l.at >= from && l.at <= to).map((l) => l.ms).sort((a, b) => a - b);
    return { n: xs.length, p50: xs[Math.floor(xs.length * 0.5)]?.toFixed(1), p99: xs[Math.floor(xs.length * 0.99)]?.toFixed(1), max: xs[xs.length - 1]?.toFixed(1) };
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  await sleep(3_000);
  const b0 = performance.now();
  await sleep(10_000);
  const baseline = p99(b0, performance.now());

  // Batched deletes of day D2 for 20 s, as retention's per-webhook pass does (500 rows a statement).
  const d0 = performance.now();
  let deleted = 0;
  while (performance.now() - d0 < 20_000) {
    const r = await db.query(
      `WITH b AS (SELECT id FROM deliveries WHERE webhook_id = 'wh_m' AND id >= $1 AND id < $2 AND status IN ('succeeded', 'failed', 'cancelled') ORDER BY id LIMIT 500),
            d AS (DELETE FROM deliveries x USING b WHERE x.id = b.id RETURNING x.event_id)
       DELETE FROM events e USING d WHERE e.id = d.event_id`,
      [`del_${encodeTime(dayD2, 10).toLowerCase()}`, `del_${encodeTime(dayD2 + DAY, 10).toLowerCase()}`],
    );
    deleted += r.rowCount ?? 0;
  }
  const batched = p99(d0, performance.now());
  await sleep(3_000);

  // The day dropped, as retention does it (deliveries first, then events: detach, then drop).
  const w0 = performance.now();
  await sleep(2_000);
  const t0 = performance.now();
  const stamp = new Date(dayD).toISOString().slice(0, 10).replace(/-/g, '');
  const dropped: string[] = [];
  for (const part of (await listHistoryPartitions(db)).filter((x) => x.name === `deliveries_p${stamp}` || x.name === `events_p${stamp}`).sort((a) => (a.table === 'deliveries' ? -1 : 1))) {
    if (await dropHistoryPartition(db, part, {})) dropped.push(...droppedWith(part).map((d) => d.name));
  }
  const dropMs = performance.now() - t0;
  await sleep(3_000);
  const during = p99(w0, performance.now());
  stop = true;
  await Promise.all(load);
  console.log(JSON.stringify({ deliveriesInDay: N, dropMs: Math.round(dropMs), dropped, baseline, batched: { ...batched, rowsDeleted: deleted }, during }, null, 2));
  await db.end();
});
