import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

async function automation(apiKey: string, code: string) {
  const r = await app.api(apiKey, 'POST', '/v1/automations', { name: 'a', code });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string };
}

async function hookWith(apiKey: string, receiver: Receiver, automationId: string | null, body: Record<string, unknown> = {}) {
  const wh = await createWebhook(app, apiKey, { url: receiver.url, ...body });
  if (automationId) {
    const t = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId });
    expect(t.status, JSON.stringify(t.body)).toBe(200);
  }
  return wh;
}

async function send(wh: { publicId: string; ingestSecret: string }, body: unknown) {
  const r = await ingest(app, wh.publicId, { body: JSON.stringify(body), headers: { authorization: `Bearer ${wh.ingestSecret}` } });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body as { eventId: string; deliveryId: string };
}

async function settled(apiKey: string, id: string, statuses = ['succeeded', 'failed', 'cancelled'], timeoutMs = 20_000) {
  return waitFor(async () => {
    const d = (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
    return statuses.includes(d.status) ? d : null;
  }, timeoutMs);
}

async function runsOf(apiKey: string, automationId: string) {
  return (await app.api(apiKey, 'GET', `/v1/automations/${automationId}/runs?limit=100`)).body.items as any[];
}

describe('automations in the delivery path', () => {
  it('transforms, records the version it ran; pinning holds across new versions; replay re-sends the snapshot without running code', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey } = await app.project('pro');
      const a = await automation(apiKey, 'export default async (event) => { await null; return { v: 1, type: event.body.type, id: event.id, channel: event.channel, path: event.path } }');
      const wh = await hookWith(apiKey, receiver, a.id);
      const first = await send(wh, { type: 'charge.succeeded' });
      const d1 = await settled(apiKey, first.deliveryId);
      expect(d1).toMatchObject({ status: 'succeeded', automationId: a.id, automationVersion: 1 });
      expect(JSON.parse(receiver.received[0].body.toString())).toEqual({ v: 1, type: 'charge.succeeded', id: first.eventId, channel: 'http', path: '/' });
      expect(receiver.received[0].headers['content-type']).toBe('application/json');

      // A new version does not change what the webhook runs until it is pinned.
      expect((await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: 'export default (e) => "v2:" + e.body.type' })).status).toBe(201);
      const second = await send(wh, { type: 'b' });
      expect(await settled(apiKey, second.deliveryId)).toMatchObject({ status: 'succeeded', automationVersion: 1 });
      await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
      const third = await send(wh, { type: 'c' });
      expect(await settled(apiKey, third.deliveryId)).toMatchObject({ status: 'succeeded', automationVersion: 2 });
      expect(receiver.received[2].body.toString()).toBe('v2:c');
      expect(receiver.received[2].headers['content-type']).toBe('text/plain; charset=utf-8');

      const runs = await runsOf(apiKey, a.id);
      expect(runs.map((r) => [r.deliveryId, r.version, r.status])).toEqual([
        [third.deliveryId, 2, 'ok'],
        [second.deliveryId, 1, 'ok'],
        [first.deliveryId, 1, 'ok'],
      ]);

      // Replay of the first delivery: the v1 snapshot, byte for byte, no new run (the webhook now pins v2).
      const replay = await app.api(apiKey, 'POST', `/v1/deliveries/${first.deliveryId}/replay`);
      expect(replay.status).toBe(202);
      const replayed = await settled(apiKey, replay.body.filter.deliveryIds[0]);
      expect(replayed).toMatchObject({ status: 'succeeded', replayOf: first.deliveryId, automationVersion: 1 });
      expect(receiver.received[3].body.equals(receiver.received[0].body)).toBe(true);
      expect(receiver.received[3].headers['webhook-id']).toBe(receiver.received[0].headers['webhook-id']);
      expect(await runsOf(apiKey, a.id)).toHaveLength(3);
    } finally {
      await receiver.close();
    }
  });

  it('drop, throw and the limits end in their recorded status, while another webhook’s deliveries all go out', async () => {
    const receiver = await startReceiver();
    const other = await startReceiver();
    try {
      const { apiKey } = await app.project('business'); // 1,000 ms of CPU per run
      const bystander = await app.project('pro');
      const plain = await hookWith(bystander.apiKey, other, null);
      const cases: [string, string, string, string][] = [
        // [code, delivery status, run status, error pattern]
        ['export default (e) => e.body.test ? null : e.body', 'cancelled', 'ok', 'dropped by automation'],
        ['export default () => { throw new Error("bad input") }', 'failed', 'error', 'Error: bad input'],
        ['export default () => { while (true) {} }', 'failed', 'cpu_limit', 'cpu_limit'],
        ['export default () => new Promise(() => { while (true) {} })', 'failed', 'cpu_limit', 'cpu_limit'],
        ['export default () => new Uint8Array(512 * 1024 * 1024).length', 'failed', 'memory_limit', 'memory_limit'],
        ['export default async (e, ctx) => { await ctx.fetch("https://example.com/"); return e.body }', 'failed', 'egress_blocked', 'egress_blocked'],
        [`export default async (e, ctx) => { for (let i = 0; i < 100; i++) await ctx.fetch("http://127.0.0.1:1/" + i); return 1 }`, 'failed', 'egress_blocked', 'egress_blocked'],
        ['export default (e) => { Object.prototype.polluted = 1; return { escaped: ({}).constructor.constructor("return typeof process")() } }', 'succeeded', 'ok', ''],
        ['export default () => { console.log("z".repeat(1024 * 1024)); return { logged: true } }', 'succeeded', 'ok', ''],
      ];
      const started: { deliveryId: string; automationId: string; expect: (typeof cases)[number] }[] = [];
      // The bystander's deliveries, one every 50 ms while the automations run: their ingest-to-receipt latency.
      const sentAt = new Map<string, number>();
      let ticking = true;
      const ticker = (async () => {
        for (let i = 0; i < 200 && ticking; i++) {
          const r = await send(plain, { n: i });
          sentAt.set(r.eventId, Date.now());
          await new Promise((res) => setTimeout(res, 50));
        }
      })();
      for (const c of cases) {
        const a = await automation(apiKey, c[0]);
        // One active automation at a time fits every tier's active count.
        const wh = await hookWith(apiKey, receiver, a.id, { retryPolicy: { maxAttempts: 1 } });
        const r = await send(wh, { test: true });
        started.push({ deliveryId: r.deliveryId, automationId: a.id, expect: c });
        const d = await settled(apiKey, r.deliveryId);
        expect(d.status, c[0]).toBe(c[1]);
        if (c[3]) expect(d.lastAttempt.error, c[0]).toContain(c[3]);
        const [run] = await runsOf(apiKey, a.id);
        expect(run, c[0]).toMatchObject({ deliveryId: r.deliveryId, status: c[2], version: 1 });
        if (c[2] === 'cpu_limit') expect(run.cpuMs).toBeGreaterThanOrEqual(900);
        await app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { status: 'disabled' });
      }
      ticking = false;
      await ticker;
      // What the prototype-pollution and 1 MB-log runs delivered.
      const bodies = receiver.received.map((r) => JSON.parse(r.body.toString()));
      expect(bodies).toEqual([{ escaped: 'undefined' }, { logged: true }]);
      const logRun = (await runsOf(apiKey, started[started.length - 1].automationId))[0];
      expect(logRun).toMatchObject({ logsTruncated: true });
      expect(Buffer.byteLength(logRun.logs)).toBe(64 * 1024);

      // The bystander: every delivery arrived, each once (how promptly, while loops run at their
      // CPU limit, is measured in automations.delivery.timing.test.ts).
      await waitFor(() => other.received.length >= sentAt.size, 10_000).catch(() => {});
      expect(sentAt.size).toBeGreaterThan(20);
      expect(new Set(other.received.map((r) => String(r.headers['webhook-id'])))).toEqual(new Set(sentAt.keys()));
      expect(other.received).toHaveLength(sentAt.size);
    } finally {
      await receiver.close();
      await other.close();
    }
  });

  it('a failed subrequest is retried by the webhook’s retry policy', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey } = await app.project('enterprise');
      await app.api(apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['127.0.0.1'] });
      const a = await automation(apiKey, 'export default async (e, ctx) => { await ctx.fetch("http://127.0.0.1:1/"); return e.body }');
      const wh = await hookWith(apiKey, receiver, a.id, { retryPolicy: { maxAttempts: 2, backoff: 'fixed', initialDelayMs: 100 } });
      const r = await send(wh, {});
      const d = await settled(apiKey, r.deliveryId, ['failed']);
      expect(d.attempts).toBe(2);
      const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${r.deliveryId}/attempts`)).body.items;
      expect(attempts.map((x: any) => x.outcome).sort()).toEqual(['failed', 'retry']);
      expect((await runsOf(apiKey, a.id)).map((x) => x.status)).toEqual(['error', 'error']);
    } finally {
      await receiver.close();
    }
  });

  it('concurrency: the tier’s limit holds across two runners; runs beyond it wait as jobs', async () => {
    const slow = await startReceiver(() => ({ status: 200, body: '{}', delayMs: 300 }));
    const receiver = await startReceiver();
    const second = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const { apiKey, projectId } = await app.project('enterprise');
      await app.rt.db.pool.query(`UPDATE projects SET custom_quotas = custom_quotas || '{"automation_concurrency": 1}'::jsonb WHERE id = $1`, [projectId]);
      await app.api(apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['127.0.0.1'] });
      const a = await automation(apiKey, `export default async (e, ctx) => { await ctx.fetch("${slow.url}/slow"); return e.body }`);
      const wh = await hookWith(apiKey, receiver, a.id);
      const started = Date.now();
      const sent = [];
      for (let i = 0; i < 4; i++) sent.push(await send(wh, { i }));
      for (const s of sent) expect(await settled(apiKey, s.deliveryId, ['succeeded', 'failed'], 30_000)).toMatchObject({ status: 'succeeded', attempts: 1 });
      expect(slow.maxInFlight).toBe(1);
      expect(slow.received).toHaveLength(4);
      expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 300);
      expect(await runsOf(apiKey, a.id)).toHaveLength(4);
      // Every slot is given back once unused (after a short linger, see slots.ts).
      await waitFor(async () => {
        const { rows } = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM automation_leases WHERE project_id = $1', [projectId]);
        return rows[0].n === 0;
      }, 5_000);
    } finally {
      await second.stop();
      await slow.close();
      await receiver.close();
    }
  });

  it('a run that cannot be made (a database error) is retried by the retry policy, with the pinned version', async () => {
    const receiver = await startReceiver();
    const { rows } = await app.rt.db.pool.query(`SELECT pg_get_functiondef('automation_leases_take(text,text[],int,int)'::regprocedure) AS def`);
    const original = rows[0].def as string;
    try {
      const { apiKey, projectId } = await app.project('pro');
      const a = await automation(apiKey, 'export default (e) => e.body');
      const wh = await hookWith(apiKey, receiver, a.id, { retryPolicy: { maxAttempts: 3, backoff: 'fixed', initialDelayMs: 100 } });
      // This project's lease fails once (a transient database error), then works again (a sequence: not rolled back with the error).
      await app.rt.db.pool.query(`DROP SEQUENCE IF EXISTS test_lease_failures; CREATE SEQUENCE test_lease_failures`);
      await app.rt.db.pool.query(
        original.replace(/\nBEGIN/i, `\nBEGIN\n  IF project = '${projectId}' AND nextval('test_lease_failures') = 1 THEN\n    RAISE EXCEPTION 'transient lease failure';\n  END IF;`),
      );
      const r = await send(wh, { n: 1 });
      const d = await settled(apiKey, r.deliveryId, ['succeeded', 'failed'], 20_000);
      expect(d).toMatchObject({ status: 'succeeded', attempts: 2, automationVersion: 1 });
      const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${r.deliveryId}/attempts`)).body.items;
      const retried = attempts.find((x: any) => x.outcome === 'retry');
      expect(retried.error).toMatch(/transient lease failure/);
    } finally {
      await app.rt.db.pool.query(original);
      await receiver.close();
    }
  });
});
