// Automations in the delivery path, timed: a loop at its CPU limit holds no runner (another
// webhook's deliveries go out promptly meanwhile), and a run beyond the project's concurrency is
// answered at once. Wall-clock figures: this file runs in the project that runs alone
// (vitest.config.ts); what each run ends in is checked in automations.delivery.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAutomation } from '../src/automations/run.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { gate, startReceiver } from './support/receiver.ts';
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

async function settled(apiKey: string, id: string, timeoutMs = 20_000) {
  return waitFor(async () => {
    const d = (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
    return ['succeeded', 'failed', 'cancelled'].includes(d.status) ? d : null;
  }, timeoutMs);
}

describe('automations in the delivery path, timed', () => {
  it('loops at their CPU limit hold no runner: another webhook’s deliveries go out promptly meanwhile', async () => {
    const receiver = await startReceiver();
    const other = await startReceiver();
    try {
      const { apiKey } = await app.project('business'); // 1,000 ms of CPU per run
      const bystander = await app.project('pro');
      const plain = await hookWith(bystander.apiKey, other, null);
      // The bystander's deliveries, one every 50 ms while the loops run: their ingest-to-receipt latency.
      const sentAt = new Map<string, number>();
      let ticking = true;
      const ticker = (async () => {
        for (let i = 0; i < 200 && ticking; i++) {
          const r = await send(plain, { n: i });
          sentAt.set(r.eventId, Date.now());
          await new Promise((res) => setTimeout(res, 50));
        }
      })();
      for (const code of ['export default () => { while (true) {} }', 'export default () => new Promise(() => { while (true) {} })']) {
        const a = await automation(apiKey, code);
        const wh = await hookWith(apiKey, receiver, a.id, { retryPolicy: { maxAttempts: 1 } });
        const d = await settled(apiKey, (await send(wh, { loop: true })).deliveryId);
        expect(d.status, code).toBe('failed');
        expect(d.lastAttempt.error, code).toContain('cpu_limit');
        await app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { status: 'disabled' });
      }
      ticking = false;
      await ticker;
      await waitFor(() => other.received.length >= sentAt.size, 10_000);
      const latencies = other.received.map((r) => r.at - sentAt.get(String(r.headers['webhook-id']))!).sort((x, y) => x - y);
      expect(latencies.length).toBeGreaterThan(20);
      // Had the loops run on the runner's thread, every delivery due during one would wait for
      // its end (1 s): a third of them or more. Generous bounds below that.
      const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
      expect(at(0.5), JSON.stringify(latencies)).toBeLessThan(300);
      expect(at(0.9), JSON.stringify(latencies)).toBeLessThan(700);
      expect(latencies[latencies.length - 1], JSON.stringify(latencies)).toBeLessThan(3_000);
    } finally {
      await receiver.close();
      await other.close();
    }
  });

  it('a run beyond the project’s concurrency in this process is answered at once (it waits as a job; no runner slot held)', async () => {
    // The first run's subrequest is held open until the second has its answer.
    const held = gate();
    const slow = await startReceiver(() => ({ status: 200, body: '{}', until: held.opened }));
    try {
      const { apiKey, projectId } = await app.project('enterprise');
      await app.rt.db.pool.query(`UPDATE projects SET custom_quotas = custom_quotas || '{"automation_concurrency": 1}'::jsonb WHERE id = $1`, [projectId]);
      await app.api(apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['127.0.0.1'] });
      const a = await automation(apiKey, `export default async (e, ctx) => { await ctx.fetch("${slow.url}/slow"); return e.body }`);
      const event = { id: 'evt_local', receivedAt: new Date().toISOString(), channel: 'http', method: 'POST', path: '/', query: {}, headers: {}, contentType: 'application/json', body: { n: 1 } };
      const req = { projectId, automationId: a.id, version: 1, event, deliveryId: null, mode: 'delivery' as const };
      const first = runAutomation(app.rt, req);
      await waitFor(async () => (slow.received.length > 0 ? true : null), 10_000);
      const started = performance.now();
      const second = await runAutomation(app.rt, req);
      const elapsed = performance.now() - started;
      expect(second.kind).toBe('wait');
      expect(slow.inFlight).toBe(1);
      // At once: it used to wait up to 1 s for the first run's slot. Generous, below that second.
      expect(elapsed).toBeLessThan(800);
      held.open();
      expect((await first).kind).toBe('payload');
    } finally {
      held.open();
      await slow.close();
    }
  });
});
