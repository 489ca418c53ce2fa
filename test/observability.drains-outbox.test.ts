// The drain outbox: an event is deleted only once sent (a batch deletes by id, so an event whose
// transaction commits while a batch is out is sent later, not lost); emitting in the delivery path
// neither plans nor locks a job row; the outbox stays within its bound while a drain backs off;
// sends at once per process are bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRAIN_MAX_CONCURRENT_SENDS, planDrainSends } from '../src/drains/send.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
let sink: Awaited<ReturnType<typeof startReceiver>>;
/** Answers every request 800 ms late. */
let slow: Awaited<ReturnType<typeof startReceiver>>;
/** Paths answered 500. */
const failingPaths = new Set<string>();

beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { DRAIN_RETRY_BASE_MS: 3_600_000, DRAIN_RETRY_MAX_MS: 3_600_000, DRAIN_OUTBOX_LIMIT: 100 } });
  sink = await startReceiver((r) => {
    if (failingPaths.has(r.url)) return { status: 500 };
    // The first request of /late-commit is answered late.
    const first = r.url === '/late-commit' && sink.received.filter((x) => x.url === r.url).length === 1;
    return { status: 200, delayMs: first ? 1_500 : 0 };
  });
  slow = await startReceiver(() => ({ status: 200, delayMs: 800 }));
});
afterAll(async () => {
  await app?.stop();
  await sink?.close();
  await slow?.close();
});

const sent = (path: string) =>
  sink.received.filter((r) => r.url === path).flatMap((r) => (JSON.parse(r.body.toString()) as { events: { data: { n: number } }[] }).events.map((e) => e.data.n));

async function drainOf(path: string) {
  const { projectId, apiKey } = await app.project('pro');
  const drain = await app.api(apiKey, 'POST', '/v1/project/drains', { url: `${sink.url}${path}`, events: ['webhook.changed'] });
  expect(drain.status).toBe(201);
  return { projectId, apiKey, drainId: drain.body.id as string };
}

const emit = (db: { query: (sql: string, v: unknown[]) => Promise<unknown> }, projectId: string, n: number) =>
  db.query(`SELECT drain_emit($1, NULL, 'webhook.changed', jsonb_build_object('n', $2::int))`, [projectId, n]);

describe('event drains: the outbox and its sends', () => {
  it('an event whose transaction commits while a batch is out is not deleted with it (deletes by id)', async () => {
    const path = '/late-commit';
    const { projectId } = await drainOf(path);
    // The first request is answered late; a lower-id event commits meanwhile.
    const late = await app.rt.db.pool.connect();
    try {
      await late.query('BEGIN');
      await emit(late, projectId, 1);
      await emit(app.rt.db.pool, projectId, 2);
      await waitFor(() => sent(path).includes(2), 10_000);
      // Committed while the request is out (answered 1.5 s later): the old `id <= last` delete took it unsent.
      await late.query('COMMIT');
    } finally {
      late.release();
    }
    await waitFor(() => sent(path).includes(1), 10_000);
    expect(sent(path).sort()).toEqual([1, 2]);
    await waitFor(async () => (await app.rt.db.pool.query('SELECT count(*)::int AS n FROM drain_outbox o JOIN event_drains d ON d.id = o.drain_id WHERE d.project_id = $1', [projectId])).rows[0].n === 0, 5_000);
  });

  it('emitting neither plans nor locks a job row in the delivery path; the scheduler plans sends', async () => {
    const path = '/scheduled';
    const { projectId, drainId } = await drainOf(path);
    const tx = await app.rt.db.pool.connect();
    try {
      await tx.query('BEGIN');
      await emit(tx, projectId, 7);
      // Another transaction emits for the same drain without waiting on the first (no job-row upsert inside drain_emit).
      await tx.query("SET LOCAL lock_timeout = '2s'");
      await app.rt.db.pool.query("SET lock_timeout = '2s'");
      await emit(app.rt.db.pool, projectId, 8);
      const { rows } = await tx.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = $1 AND run_at > now() + interval '10 seconds'`, ['drain:' + drainId]);
      expect(rows[0].n).toBe(0);
      await tx.query('COMMIT');
    } finally {
      tx.release();
    }
    await waitFor(() => sent(path).length === 2, 10_000);
    expect(sent(path).sort()).toEqual([7, 8]);
  });

  it('a failing drain in a long backoff stays within DRAIN_OUTBOX_LIMIT (the oldest dropped, counted)', async () => {
    const path = '/down';
    failingPaths.add(path);
    const { projectId, apiKey, drainId } = await drainOf(path);
    await emit(app.rt.db.pool, projectId, 0);
    // The first send fails: the drain is now in an hour-long backoff.
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/project/drains/${drainId}`)).body.lastError === 'HTTP 500', 10_000);
    await app.rt.db.pool.query(`SELECT drain_emit($1, NULL, 'webhook.changed', jsonb_build_object('n', g)) FROM generate_series(1, 250) g`, [projectId]);
    await planDrainSends(app.rt);
    const count = async () => (await app.rt.db.pool.query('SELECT count(*)::int AS n FROM drain_outbox WHERE drain_id = $1', [drainId])).rows[0].n as number;
    await waitFor(async () => (await count()) <= 100, 5_000);
    expect(await count()).toBe(100);
    const view = (await app.api(apiKey, 'GET', `/v1/project/drains/${drainId}`)).body;
    expect(view.droppedCount).toBe(151);
    // The newest are kept.
    const { rows } = await app.rt.db.pool.query(`SELECT min((data->>'n')::int) AS lo, max((data->>'n')::int) AS hi FROM drain_outbox WHERE drain_id = $1`, [drainId]);
    expect(rows[0]).toEqual({ lo: 151, hi: 250 });
    expect(sink.received.filter((r) => r.url === path)).toHaveLength(1);
  });

  it('at most DRAIN_MAX_CONCURRENT_SENDS drains send at once per process; the others are planned again and all arrive', async () => {
    const { projectId, apiKey } = await app.project('enterprise');
    for (let i = 0; i < 4; i++) expect((await app.api(apiKey, 'POST', '/v1/project/drains', { url: `${slow.url}/d${i}`, events: ['webhook.changed'] })).status).toBe(201);
    await emit(app.rt.db.pool, projectId, 1);
    await waitFor(() => new Set(slow.received.map((r) => r.url)).size === 4, 20_000);
    expect(slow.maxInFlight).toBeLessThanOrEqual(DRAIN_MAX_CONCURRENT_SENDS);
  }, 30_000);
});
