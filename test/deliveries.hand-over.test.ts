import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepDeliveries } from '../src/deliveries/sweep.ts';
import { ingestTargets } from '../src/ingest/ingest-target-cache.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { gate, startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// API and runner in one process (npm start): ingest hands a due delivery to its webhook's drain
// running here, without waking any runner. The runner polls once a minute here, so a delivery
// handed over and then lost would wait a minute.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true, WORKER_POLL_INTERVAL_MS: 60_000 } });
});
afterAll(async () => {
  await app?.stop();
});

/**
 * A webhook whose receiver holds its answer to event 0 until `held` opens, with event 0 sent and
 * received: its drain runs (and stays) in this process from then on.
 */
async function drainedWebhook() {
  const held = gate();
  const receiver = await startReceiver((r) => (JSON.parse(r.body.toString()).n === 0 ? { status: 200, until: held.opened } : { status: 200 }));
  const { apiKey, projectId } = await ingestingProject(app);
  const wh = await createWebhook(app, apiKey, { url: `${receiver.url}/hook` });
  const send = async (n: number) => expect((await ingest(app, wh.publicId, { body: JSON.stringify({ n }), headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
  await send(0);
  await waitFor(() => receiver.received.length === 1 || null, 20_000);
  return { held, receiver, wh, send, apiKey, projectId };
}

const deliveryOf = async (webhookId: string, n: number) =>
  (
    await app.rt.db.pool.query(
      `SELECT d.id, d.status, d.attempts, d.slot_lease, (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS attempt_rows
         FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1 AND convert_from(e.body, 'UTF8') = $2`,
      [webhookId, JSON.stringify({ n })],
    )
  ).rows[0] as { id: string; status: string; attempts: number; slot_lease: string | null; attempt_rows: number };

/** Records what RunnerWakeUp.claimDirect answers (reservations made, and given back) until `restore`: for `only` that webhook, if given. */
function watchDirectClaims(only?: string) {
  const claimDirect = app.rt.runners.claimDirect.bind(app.rt.runners);
  const seen = { reserved: 0, refused: 0, cancelled: 0 };
  app.rt.runners.claimDirect = (webhookId, configVersion) => {
    const r = claimDirect(webhookId, configVersion);
    if (only && webhookId !== only) return r;
    if (!r) {
      seen.refused++;
      return r;
    }
    seen.reserved++;
    return { ...r, cancel: () => (seen.cancelled++, r.cancel()) };
  };
  return { seen, restore: () => (app.rt.runners.claimDirect = claimDirect) };
}

describe('ingest handing deliveries to a drain in the same process', () => {
  it('goes straight to the running drain: no runner is woken, each goes out once, and no job row is left', async () => {
    // The first event wakes the runner; its drain stays while the receiver holds the answer.
    const { held, receiver, wh, send } = await drainedWebhook();
    // Handed over, not claimed by the ingest statement (direct claims have tests of their own below):
    // the drain's batch claims take them.
    const claimDirect = app.rt.runners.claimDirect.bind(app.rt.runners);
    let asked = 0;
    app.rt.runners.claimDirect = () => (asked++, null);
    try {
      // Every job row written from here on is recorded: a delivery handed over is written without one.
      await app.rt.db.pool.query(`CREATE TABLE IF NOT EXISTS test_job_keys (key text);
        CREATE OR REPLACE FUNCTION test_note_job_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_job_keys VALUES (NEW.key); RETURN NEW; END $$;
        CREATE OR REPLACE TRIGGER test_note_job_key AFTER INSERT ON graphile_worker._private_jobs FOR EACH ROW EXECUTE FUNCTION test_note_job_key();`);
      let nudges = 0;
      const nudge = app.rt.runners.nudge.bind(app.rt.runners);
      app.rt.runners.nudge = (count?: number) => {
        nudges++;
        nudge(count);
      };
      try {
        for (let n = 1; n <= 5; n++) await send(n);
        await waitFor(() => receiver.received.length === 6 || null, 20_000);
      } finally {
        app.rt.runners.nudge = nudge;
      }
      expect(nudges, 'runners woken for deliveries handed to the drain').toBe(0);
      expect(asked, 'ingest asked for a direct claim first').toBe(5);
      const count = async (sql: string) => (await app.rt.db.pool.query(sql)).rows[0].n as number;
      // The drain still runs (the first answer is held) and the runner polls once a minute: the
      // claims that took the handed-over deliveries deleted their job rows.
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = '${wh.id}' AND status = 'succeeded'`)) === 5 || null, 20_000);
      const handed = (await app.rt.db.pool.query(`SELECT id FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [wh.id])).rows.map((r) => `del:${r.id}`);
      expect(handed).toHaveLength(5);
      expect(await count(`SELECT count(*)::int AS n FROM test_job_keys WHERE key = ANY('{${handed.join(',')}}'::text[])`), 'job rows written for handed-over deliveries').toBe(0);
      await app.rt.db.pool.query('DROP TRIGGER test_note_job_key ON graphile_worker._private_jobs');
      expect(await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ANY('{${handed.join(',')}}'::text[])`)).toBe(0);
      held.open();
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = '${wh.id}' AND status = 'succeeded'`)) === 6 || null, 20_000);
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key LIKE 'del:%'`)) === 0 || null, 20_000);
      expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    } finally {
      app.rt.runners.claimDirect = claimDirect;
      held.open();
      await receiver.close();
    }
  });

  it('gives a delivery written without a job its job after all when the drain ended before the hand-over', async () => {
    const { held, receiver, wh, send } = await drainedWebhook();
    const handOver = app.rt.runners.handOver.bind(app.rt.runners);
    const claimDirect = app.rt.runners.claimDirect.bind(app.rt.runners);
    // Handed over rather than claimed by the ingest statement (the drain has room: see the direct claims below).
    app.rt.runners.claimDirect = () => null;
    try {
      expect(app.rt.runners.drainRunning(wh.id), 'the drain runs while the first answer is held').toBe(true);
      // Written without a job (a drain ran at the decision), then the drain is gone at the hand-over.
      let refused = 0;
      app.rt.runners.handOver = () => (refused++, false);
      await send(1);
      app.rt.runners.handOver = handOver;
      expect(refused).toBe(1);
      const [{ id }] = (await app.rt.db.pool.query(`SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1 AND convert_from(e.body, 'UTF8') = '{"n":1}'`, [wh.id])).rows;
      // Its job is there once ingest answered (the runner polls once a minute: the job is what runs it).
      const jobs = (await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = $1`, [`del:${id}`])).rows[0].n as number;
      const status = (await app.rt.db.pool.query('SELECT status FROM deliveries WHERE id = $1', [id])).rows[0].status as string;
      expect(jobs === 1 || status !== 'queued', `a job for ${id} (status ${status})`).toBe(true);
      held.open();
      await waitFor(() => receiver.received.length === 2 || null, 20_000);
      expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1]);
    } finally {
      app.rt.runners.handOver = handOver;
      app.rt.runners.claimDirect = claimDirect;
      held.open();
      await receiver.close();
    }
  });

  it('leaves nothing behind when the process dies with a delivery handed over: the sweep gives it a job', async () => {
    const receiver = await startReceiver(() => ({ status: 200 }));
    const { drainRunning, handOver } = app.rt.runners;
    try {
      const { apiKey } = await ingestingProject(app);
      const wh = await createWebhook(app, apiKey, { url: `${receiver.url}/hook` });
      // As if a drain ran here at ingest and the process died before it claimed the delivery.
      app.rt.runners.drainRunning = () => true;
      app.rt.runners.handOver = () => true;
      expect((await ingest(app, wh.publicId, { body: '{"lost":true}', headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
      app.rt.runners.drainRunning = drainRunning;
      app.rt.runners.handOver = handOver;
      const [d] = (await app.rt.db.pool.query(`SELECT id, status FROM deliveries WHERE webhook_id = $1`, [wh.id])).rows;
      expect(d.status).toBe('queued');
      expect((await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = $1`, [`del:${d.id}`])).rows[0].n).toBe(0);
      // The sweep leaves a waiting delivery alone for 20 s; this one waited longer.
      await app.rt.db.pool.query(`UPDATE deliveries SET updated_at = now() - interval '30 seconds' WHERE id = $1`, [d.id]);
      await waitFor(async () => (await sweepDeliveries(app.rt)).requeued > 0 || null, 20_000);
      app.rt.runners.nudge();
      await waitFor(() => receiver.received.length === 1 || null, 20_000);
      await waitFor(async () => (await app.rt.db.pool.query('SELECT status FROM deliveries WHERE id = $1', [d.id])).rows[0].status === 'succeeded' || null, 20_000);
    } finally {
      app.rt.runners.drainRunning = drainRunning;
      app.rt.runners.handOver = handOver;
      await receiver.close();
    }
  });
});

describe('ingest claiming deliveries for a drain in the same process (direct claims)', () => {
  const leases = async (webhookId: string) => (await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM webhook_slot_leases WHERE webhook_id = $1`, [webhookId])).rows[0].n as number;

  it('writes the delivery claimed, under the drain\'s lease: delivering when ingest answers, sent once, no job and no claim statement', async () => {
    const { held, receiver, wh, send } = await drainedWebhook();
    const watch = watchDirectClaims(wh.id);
    const claims: string[] = [];
    const query = app.rt.db.relaxedPool.query.bind(app.rt.db.relaxedPool);
    // Every claim statement of the runner (they go through its relaxed pool).
    app.rt.db.relaxedPool.query = ((config: unknown, ...rest: unknown[]) => {
      const name = (config as { name?: string } | null)?.name;
      if (name === 'claim_delivery_batch' || name === 'claim_delivery') claims.push(name);
      return (query as (...a: unknown[]) => unknown)(config, ...rest);
    }) as typeof query;
    try {
      for (let n = 1; n <= 3; n++) {
        await send(n);
        // Committed as claimed by the statement that wrote it, before the answer.
        const d = await deliveryOf(wh.id, n);
        expect(['delivering', 'succeeded'], `delivery ${n} when ingest answered`).toContain(d.status);
        expect(d.attempts).toBe(1);
        expect(d.slot_lease, 'the drain\'s lease').not.toBeNull();
      }
      expect(watch.seen).toEqual({ reserved: 3, refused: 0, cancelled: 0 });
      await waitFor(() => receiver.received.length === 4 || null, 20_000);
      for (let n = 1; n <= 3; n++) await waitFor(async () => (await deliveryOf(wh.id, n)).status === 'succeeded' || null, 20_000);
      expect(claims, 'claim statements for directly claimed deliveries').toEqual([]);
      for (let n = 1; n <= 3; n++) expect(await deliveryOf(wh.id, n)).toMatchObject({ attempts: 1, attempt_rows: 1 });
      const ids = await Promise.all([1, 2, 3].map(async (n) => `del:${(await deliveryOf(wh.id, n)).id}`));
      expect((await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ANY($1::text[])`, [ids])).rows[0].n).toBe(0);
    } finally {
      app.rt.db.relaxedPool.query = query;
      watch.restore();
      held.open();
    }
    // The drain ends once the held answer came, and its lease goes.
    await waitFor(async () => ((await leases(wh.id)) === 0 && !app.rt.runners.drainRunning(wh.id)) || null, 20_000);
    expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1, 2, 3]);
    await receiver.close();
  });

  it('gives the reservation back when nothing is written (a duplicate): the drain still ends and its lease goes', async () => {
    const { held, receiver, wh } = await drainedWebhook();
    const watch = watchDirectClaims(wh.id);
    try {
      const post = () => ingest(app, wh.publicId, { body: '{"n":1}', headers: { 'x-webhook-secret': wh.ingestSecret, 'idempotency-key': 'once' } });
      const first = await post();
      expect(first.status).toBe(202);
      const again = await post();
      expect(again.body.deliveryId).toBe(first.body.deliveryId);
      expect(watch.seen).toMatchObject({ reserved: 2, cancelled: 1 });
    } finally {
      watch.restore();
      held.open();
    }
    await waitFor(async () => ((await leases(wh.id)) === 0 && !app.rt.runners.drainRunning(wh.id)) || null, 20_000);
    await waitFor(() => receiver.received.length === 2 || null, 20_000);
    expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1]);
    await receiver.close();
  });

  it('after a change to the webhook\'s settings, the next delivery goes the claim\'s way and every later one is sent with the new settings', async () => {
    const { held, receiver, wh, send, apiKey } = await drainedWebhook();
    const watch = watchDirectClaims(wh.id);
    try {
      const version = async () => (await app.rt.db.pool.query('SELECT config_version FROM webhooks WHERE id = $1', [wh.id])).rows[0].config_version as number;
      const before = await version();
      expect((await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { customHeaders: { 'x-setting': 'new' } })).status).toBe(200);
      // What an attempt uses raises config_version (migration direct_claims), which direct claims must match.
      expect(await version()).toBeGreaterThan(before);
      await send(1);
      expect(watch.seen.reserved, 'no direct claim with settings the drain has not read').toBe(0);
      await waitFor(() => receiver.received.length === 2 || null, 20_000);
      // The claim that took it read the new settings: the next ones are claimed directly again.
      // (The change's database notification may reach this process after that claim, and make the
      // drain read the webhook once more first: a few events, one at a time, until one is.)
      await waitFor(async () => (await deliveryOf(wh.id, 1)).status === 'succeeded' || null, 20_000);
      let n = 1;
      while (watch.seen.reserved === 0 && n < 6) {
        await send(++n);
        await waitFor(() => receiver.received.length === n + 1 || null, 20_000);
      }
      expect(watch.seen.reserved, `direct claims again within ${n - 1} events`).toBe(1);
      expect(receiver.received).toHaveLength(n + 1);
      for (const r of receiver.received.filter((r) => JSON.parse(r.body.toString()).n > 0)) expect(r.headers['x-setting']).toBe('new');
      const t = await version();
      expect((await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { timeoutMs: 9000 })).status).toBe(200);
      expect(await version()).toBeGreaterThan(t);
    } finally {
      watch.restore();
      held.open();
      await receiver.close();
    }
  });

  it('goes on claiming directly through change notifications of other webhooks and of versions its last claim read; a newer one stops it', async () => {
    const { held, receiver, wh, send } = await drainedWebhook();
    const watch = watchDirectClaims(wh.id);
    try {
      const notify = (publicIds: string[], v?: number) =>
        app.rt.db.pool.query(`SELECT pg_notify('app_events', $1)`, [JSON.stringify({ t: 'ingest-targets:changed', p: v === undefined ? { publicIds } : { publicIds, v } })]);
      const versionOf = async (id: string) => (await app.rt.db.pool.query('SELECT config_version FROM webhooks WHERE id = $1', [id])).rows[0].config_version as number;
      const version = await versionOf(wh.id);
      const other = await createWebhook(app, (await ingestingProject(app)).apiKey);
      // Heard in order: once a notification sent after them dropped another webhook's kept lookup, these reached the drains too.
      const heard = async () => {
        expect((await ingest(app, other.publicId, { headers: { 'x-webhook-secret': other.ingestSecret } })).status).toBe(202);
        expect(ingestTargets(app.rt).has(other.publicId)).toBe(true);
        await notify([other.publicId]);
        await waitFor(() => !ingestTargets(app.rt).has(other.publicId) || null, 10_000);
      };
      await notify([other.publicId], await versionOf(other.id));
      await notify([wh.publicId], version);
      await heard();
      await send(1);
      expect(watch.seen.reserved, 'claimed directly after notifications it had already read or that were not its own').toBe(1);
      await notify([wh.publicId], version + 1);
      await heard();
      await send(2);
      expect(watch.seen.reserved, 'not after a newer version than its claim read').toBe(1);
      await waitFor(() => receiver.received.length === 3 || null, 20_000);
    } finally {
      watch.restore();
      held.open();
      await receiver.close();
    }
  });

  it('sends deliveryUpdated for a directly claimed delivery: delivering, then succeeded', async () => {
    const { held, receiver, wh, send, apiKey, projectId } = await drainedWebhook();
    const seen: { id: string; status: string }[] = [];
    const client = createClient({ url: app.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
    const watch = watchDirectClaims(wh.id);
    try {
      const subscribed = new Promise<void>((resolve, reject) => {
        client.subscribe(
          { query: `subscription { deliveryUpdated { id status } }` },
          { next: (v) => seen.push((v.data as any).deliveryUpdated), error: reject, complete: () => {} },
        );
        client.on('connected', () => resolve());
      });
      await subscribed;
      await waitFor(async () => (await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM delivery_listeners WHERE project_id = $1`, [projectId])).rows[0].n > 0 || null, 20_000);
      await send(1);
      expect(watch.seen.reserved).toBe(1);
      const { id } = await deliveryOf(wh.id, 1);
      await waitFor(() => seen.some((d) => d.id === id && d.status === 'succeeded') || null, 20_000);
      expect(seen.filter((d) => d.id === id).map((d) => d.status)).toEqual(['delivering', 'succeeded']);
    } finally {
      watch.restore();
      held.open();
      await client.dispose();
      await receiver.close();
    }
  });

  it('leaves nothing behind when the process dies after a direct claim: once its lease is out, the sweep gives it back and it goes out once', async () => {
    const { held, receiver, wh, send } = await drainedWebhook();
    const claimDirect = app.rt.runners.claimDirect.bind(app.rt.runners);
    // Written claimed, then the attempt never starts (as if the process died once committed).
    app.rt.runners.claimDirect = (webhookId, configVersion) => {
      const r = claimDirect(webhookId, configVersion);
      return r && { ...r, start: () => r.cancel() };
    };
    try {
      await send(1);
    } finally {
      app.rt.runners.claimDirect = claimDirect;
      held.open();
    }
    const d = await deliveryOf(wh.id, 1);
    expect(d).toMatchObject({ status: 'delivering', attempts: 1 });
    await waitFor(async () => ((await leases(wh.id)) === 0 && !app.rt.runners.drainRunning(wh.id)) || null, 20_000);
    expect(receiver.received).toHaveLength(1);
    await app.rt.db.pool.query(`UPDATE deliveries SET lease_until = now() - interval '1 second' WHERE id = $1`, [d.id]);
    await waitFor(async () => (await sweepDeliveries(app.rt)).requeued > 0 || null, 20_000);
    app.rt.runners.nudge();
    await waitFor(async () => (await deliveryOf(wh.id, 1)).status === 'succeeded' || null, 20_000);
    expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1]);
    await receiver.close();
  });
});
