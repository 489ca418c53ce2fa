// Load process for the automations scenario: the same webhook traffic with and without a
// trivial Automation transform, in alternated rounds in one run (steady rate: ingest→receiver
// latency; burst: deliveries/s), then the sandbox alone (cold start, runs/s of one runner's pool).
import { Sandbox, type RunLimits } from '../../src/automations/sandbox.ts';
import { runLimits } from '../../src/automations/limits.ts';
import { kilobyteEvent as payload, post } from './http-post.ts';
import { serveLoadProcess } from './protocol.ts';
import { percentile, startTimingReceiver } from './receiver.ts';

export interface AutomationE2eInput {
  serviceUrl: string;
  apiKey: string;
  steadyRate: number;
  steadySeconds: number;
  rounds: number;
  burstEvents: number;
  connections: number;
  sandboxRuns: number;
  sandboxWorkers: number;
}

export interface Side {
  p50Ms: number[];
  p99Ms: number[];
  burstPerSec: number[];
}
export interface AutomationE2eOutput {
  plain: Side;
  automation: Side;
  coldStartMs: number;
  sandboxRunsPerSec: number;
  sandboxSerialMs: number;
}

/** The trivial transform: what most reshapes cost (the payload in, an object out). */
export const TRIVIAL = 'export default (event) => ({ type: event.body.type, id: event.body.id, note: event.body.data.note })';

serveLoadProcess<AutomationE2eInput, AutomationE2eOutput>(async (input) => {
  const receiver = await startTimingReceiver();
  try {
    const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
    const call = async (path: string, body: unknown, method = 'POST') => {
      const r = await fetch(`${input.serviceUrl}${path}`, { method, headers: auth, body: JSON.stringify(body) });
      const text = await r.text();
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return JSON.parse(text);
    };
    const automation = await call('/v1/automations', { name: 'bench-trivial', code: TRIVIAL });
    // Both on the contract's defaults (maxInFlight 10): nothing but a name and a url.
    const hooks = {
      plain: await call('/v1/webhooks', { name: 'bench-plain', url: `${receiver.url}/plain` }),
      automation: await call('/v1/webhooks', { name: 'bench-automation', url: `${receiver.url}/automation` }),
    };
    await call(`/v1/webhooks/${hooks.automation.id}/transform`, { kind: 'automation', automationId: automation.id }, 'PUT');

    let seq = 0;
    const sentAt = new Map<string, number>();
    async function ingest(wh: { publicId: string; ingestSecret: string }) {
      const t0 = performance.timeOrigin + performance.now();
      const res = await post(`${input.serviceUrl}/i/${wh.publicId}`, { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' }, payload(seq++));
      if (res.status !== 202) throw new Error(`ingest: ${res.status} ${res.body}`);
      const id = JSON.parse(res.body).eventId as string;
      sentAt.set(id, t0);
      return id;
    }
    function latencies(ids: string[]) {
      return ids.map((id) => receiver.firstSeen.get(id)! - sentAt.get(id)!).sort((a, b) => a - b);
    }
    async function steady(wh: { publicId: string; ingestSecret: string }) {
      const total = input.steadyRate * input.steadySeconds;
      const ids: Promise<string>[] = [];
      const start = performance.now();
      for (let i = 0; i < total; i++) {
        const wait = start + (i * 1000) / input.steadyRate - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        ids.push(ingest(wh));
      }
      const done = await Promise.all(ids);
      await waitFor(done);
      const lat = latencies(done);
      return { p50: percentile(lat, 50), p99: percentile(lat, 99) };
    }
    async function burst(wh: { publicId: string; ingestSecret: string }) {
      const start = performance.timeOrigin + performance.now();
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: input.connections }, async () => {
          while (next++ < input.burstEvents) ids.push(await ingest(wh));
        }),
      );
      await waitFor(ids);
      const last = Math.max(...ids.map((id) => receiver.firstSeen.get(id)!));
      return input.burstEvents / ((last - start) / 1000);
    }
    async function waitFor(ids: string[]) {
      const deadline = Date.now() + 300_000;
      while (ids.some((id) => !receiver.firstSeen.has(id))) {
        if (Date.now() > deadline) throw new Error('deliveries did not all arrive within 300 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    }

    const out: AutomationE2eOutput = {
      plain: { p50Ms: [], p99Ms: [], burstPerSec: [] },
      automation: { p50Ms: [], p99Ms: [], burstPerSec: [] },
      coldStartMs: 0,
      sandboxRunsPerSec: 0,
      sandboxSerialMs: 0,
    };
    // Warm-up of both paths (JIT, pools, the service's sandbox workers).
    await steady(hooks.plain);
    await steady(hooks.automation);
    for (let round = 0; round < input.rounds; round++) {
      for (const side of round % 2 === 0 ? (['plain', 'automation'] as const) : (['automation', 'plain'] as const)) {
        const s = await steady(hooks[side]);
        out[side].p50Ms.push(s.p50);
        out[side].p99Ms.push(s.p99);
        out[side].burstPerSec.push(await burst(hooks[side]));
      }
    }

    // The sandbox alone, in this process: a new pool's first run (worker start, engine load,
    // a fresh runtime), then runs/s through one runner's pool and the cost of one run alone.
    const limits: RunLimits = runLimits('enterprise');
    const eventJson = JSON.stringify({ id: 'evt_1', receivedAt: new Date().toISOString(), channel: 'http', method: 'POST', path: '/', query: {}, headers: {}, contentType: 'application/json', body: JSON.parse(payload(1)) });
    const t0 = performance.now();
    const sandbox = new Sandbox({ workers: input.sandboxWorkers, allowPrivate: false });
    const first = await sandbox.run({ code: TRIVIAL, eventJson, limits, allowedHosts: [] });
    out.coldStartMs = performance.now() - t0;
    if (first.status !== 'ok') throw new Error(`sandbox run: ${first.status} ${first.error}`);
    for (let i = 0; i < 200; i++) await sandbox.run({ code: TRIVIAL, eventJson, limits, allowedHosts: [] });
    let t = performance.now();
    for (let i = 0; i < 500; i++) await sandbox.run({ code: TRIVIAL, eventJson, limits, allowedHosts: [] });
    out.sandboxSerialMs = (performance.now() - t) / 500;
    t = performance.now();
    let left = input.sandboxRuns;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (left-- > 0) await sandbox.run({ code: TRIVIAL, eventJson, limits, allowedHosts: [] });
      }),
    );
    out.sandboxRunsPerSec = input.sandboxRuns / ((performance.now() - t) / 1000);
    await sandbox.close();
    return out;
  } finally {
    await receiver.close();
  }
});
