// Load process for the end-to-end delivery scenario: a loopback receiver, a burst of events
// ingested over HTTP, then a steady rate; measures deliveries/s and ingest→receiver latency, and
// the CPU the service and PostgreSQL spent per delivered event in each phase.
import { cpuPerEvent, sampleCpu, type CpuPerEvent, type CpuTargets } from '../cpu.ts';
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
  /** Events sent and delivered before the burst, unmeasured: a service that has just started warms up on these (JIT, pools), not on the burst. */
  warmupEvents: number;
  /** The webhook's maxInFlight; unset: created with nothing but a url (the contract's default, 10). */
  maxInFlight?: number;
  /** Processes whose CPU is read before and after each phase. */
  cpu?: CpuTargets;
}

export interface E2eOutput {
  burst: { events: number; ingestPerSec: number; deliveriesPerSec: number; p50Ms: number; p99Ms: number; totalSeconds: number; cpu: CpuPerEvent };
  steady: { events: number; sentPerSec: number; p50Ms: number; p99Ms: number; cpu: CpuPerEvent };
}

serveLoadProcess<E2eInput, E2eOutput>(async (input) => {
  const receiver = await startTimingReceiver();
  try {
    const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
    const created = await post(`${input.serviceUrl}/v1/webhooks`, auth, JSON.stringify({ name: 'bench', url: `${receiver.url}/hook`, maxInFlight: input.maxInFlight }));
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

    /** `count` events as fast as `connections` keep-alive connections allow, numbered from `first`. */
    async function flood(first: number, count: number) {
      let next = first;
      await Promise.all(
        Array.from({ length: input.connections }, async () => {
          while (next < first + count) await ingest(next++);
        }),
      );
    }

    // Warm-up, then burst: N events as fast as `connections` keep-alive connections allow.
    await flood(0, input.warmupEvents);
    await receiver.waitFor(input.warmupEvents, 120_000);
    sentAt.clear();
    await new Promise((r) => setTimeout(r, 1_000));
    const delivered = input.warmupEvents + input.burstEvents;
    const burstCpu = sampleCpu(input.cpu);
    const burstStart = performance.timeOrigin + performance.now();
    await flood(input.warmupEvents, input.burstEvents);
    const ingestDone = performance.timeOrigin + performance.now();
    await receiver.waitFor(delivered, 300_000);
    const burstCpuAfter = sampleCpu(input.cpu);
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
      cpu: cpuPerEvent(burstCpu, burstCpuAfter, input.burstEvents),
    };
    // Its last results recorded, before the steady phase's CPU is read.
    await new Promise((r) => setTimeout(r, 1_000));

    // Steady: a fixed rate, one event every 1000/rate ms, latency from send to receipt.
    sentAt.clear();
    const steadyTotal = Math.round(input.steadyRate * input.steadySeconds);
    const steadyCpu = sampleCpu(input.cpu);
    const steadyStart = performance.now();
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < steadyTotal; i++) {
      const due = steadyStart + (i * 1000) / input.steadyRate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      inflight.push(ingest(delivered + i));
    }
    // Events sent over the intervals between the first and the last.
    const sentPerSec = Math.max(1, steadyTotal - 1) / Math.max(0.001, (performance.now() - steadyStart) / 1000);
    await Promise.all(inflight);
    await receiver.waitFor(delivered + steadyTotal, 120_000);
    const steadyCpuAfter = sampleCpu(input.cpu);
    const steadyLat = latencies(sentAt.keys());
    return {
      burst,
      steady: { events: steadyTotal, sentPerSec, p50Ms: percentile(steadyLat, 50), p99Ms: percentile(steadyLat, 99), cpu: cpuPerEvent(steadyCpu, steadyCpuAfter, steadyTotal) },
    };
  } finally {
    await receiver.close();
  }
});
