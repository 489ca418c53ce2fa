// Load process for the end-to-end delivery scenario: a loopback receiver, a burst of events
// ingested over HTTP, then a steady rate; measures deliveries/s and ingest→receiver latency.
import { kilobyteEvent as payload, post } from './http-post.ts';
import { serveLoadProcess } from './protocol.ts';
import { percentile, startTimingReceiver } from './receiver.ts';

export interface E2eInput {
  serviceUrl: string;
  apiKey: string;
  burstEvents: number;
  steadyRate: number;
  steadySeconds: number;
  connections: number;
}

export interface E2eOutput {
  burst: { events: number; ingestPerSec: number; deliveriesPerSec: number; p50Ms: number; p99Ms: number; totalSeconds: number };
  steady: { events: number; p50Ms: number; p99Ms: number };
}

serveLoadProcess<E2eInput, E2eOutput>(async (input) => {
  const receiver = await startTimingReceiver();
  try {
    const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
    const created = await post(`${input.serviceUrl}/v1/webhooks`, auth, JSON.stringify({ name: 'bench', url: `${receiver.url}/hook`, maxInFlight: 100 }));
    if (created.status !== 200 && created.status !== 201) throw new Error(`create webhook: ${created.status} ${created.body}`);
    const wh = JSON.parse(created.body);
    const ingestUrl = `${input.serviceUrl}/i/${wh.publicId}`;
    const ingestHeaders = { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' };
    const sentAt = new Map<string, number>();

    async function ingest(i: number) {
      const t0 = performance.timeOrigin + performance.now();
      const res = await post(ingestUrl, ingestHeaders, payload(i));
      if (res.status !== 202) throw new Error(`ingest: ${res.status} ${res.body}`);
      sentAt.set(JSON.parse(res.body).eventId, t0);
    }
    function latencies(ids: Iterable<string>) {
      const out: number[] = [];
      for (const id of ids) {
        const t = receiver.firstSeen.get(id);
        const s = sentAt.get(id);
        if (t !== undefined && s !== undefined) out.push(t - s);
      }
      return out.sort((a, b) => a - b);
    }

    // Burst: N events as fast as `connections` keep-alive connections allow.
    const burstStart = performance.timeOrigin + performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: input.connections }, async () => {
        while (next < input.burstEvents) await ingest(next++);
      }),
    );
    const ingestDone = performance.timeOrigin + performance.now();
    await receiver.waitFor(input.burstEvents, 300_000);
    const times = [...receiver.firstSeen.values()].sort((a, b) => a - b);
    const burstIds = [...sentAt.keys()];
    const burstLat = latencies(burstIds);
    const burst = {
      events: input.burstEvents,
      ingestPerSec: input.burstEvents / ((ingestDone - burstStart) / 1000),
      deliveriesPerSec: input.burstEvents / ((times[times.length - 1] - burstStart) / 1000),
      p50Ms: percentile(burstLat, 50),
      p99Ms: percentile(burstLat, 99),
      totalSeconds: (times[times.length - 1] - burstStart) / 1000,
    };

    // Steady: a fixed rate, one event every 1000/rate ms, latency from send to receipt.
    sentAt.clear();
    const steadyTotal = input.steadyRate * input.steadySeconds;
    const steadyStart = performance.now();
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < steadyTotal; i++) {
      const due = steadyStart + (i * 1000) / input.steadyRate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      inflight.push(ingest(input.burstEvents + i));
    }
    await Promise.all(inflight);
    await receiver.waitFor(input.burstEvents + steadyTotal, 120_000);
    const steadyLat = latencies(sentAt.keys());
    return { burst, steady: { events: steadyTotal, p50Ms: percentile(steadyLat, 50), p99Ms: percentile(steadyLat, 99) } };
  } finally {
    await receiver.close();
  }
});
