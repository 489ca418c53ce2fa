// Load process for the steady-rate sweep (bench/scenarios/steady-sweep.ts): a producer that sends
// one ~1 KB event every 1/rate s on schedule, stamping each event in its body right before the
// request is written, and a loopback receiver that records arrival − stamp. Ingest answer
// latency is the same stamp to the end of the 202 answer.
//
// The producer never queues behind its own connections: each event is sent at its scheduled time
// on an idle keep-alive connection, or on a new one when every open connection still waits for
// an answer (the agent has no socket limit). The stamp is taken when the request goes out, so a
// late timer of this process shows up as sender lag (reported), not as service latency.
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { cpuPerEvent, sampleCpu, type CpuPerEvent, type CpuTargets } from '../cpu.ts';
import { serveLoadProcess } from './protocol.ts';
import { percentile } from './receiver.ts';

export interface SweepInput {
  serviceUrl: string;
  apiKey: string;
  rates: number[];
  seconds: number;
  /** Events at the lowest rate before the first phase (JIT, pools), not measured. */
  warmupEvents: number;
  /** Events ingested as fast as `burstConnections` allow, drained, then the sweep again; 0: no burst. */
  burstEvents: number;
  burstConnections: number;
  /** The rate during which GET /healthz is probed (every healthzEveryMs). */
  healthzRate: number;
  healthzEveryMs: number;
  /** The webhook's maxInFlight; unset: created with nothing but a url (the contract's default, 10). */
  maxInFlight?: number;
  /** The service's processes and PostgreSQL's postmaster: their CPU is read before and after each phase. */
  cpu?: CpuTargets;
}

export interface Figures {
  p50: number;
  p99: number;
  max: number;
}

export interface SweepPhase {
  rate: number;
  sent: number;
  delivered: number;
  failures: number;
  /** Events per second actually sent over the phase. */
  sentPerSec: number;
  ingest: Figures;
  e2e: Figures;
  /** Write time − scheduled time: how late the producer itself was (its timer, its CPU). */
  senderLag: Figures;
  healthz?: Figures & { probes: number };
  /** Per second of the phase, how many of its events took more than 100 ms to arrive: a stall shows as one bad second, saturation as many. */
  slowPerSecond: number[];
  /** The load process's own event-loop delay during the phase. */
  loadLoopDelayP99Ms: number;
  connectionsOpened: number;
  /** When the phase's first event was due (ISO time), to line it up with the cluster's checkpoints in the bench log. */
  startedAt: string;
  /** CPU of the service and of PostgreSQL from the phase's first event until its last one arrived, per delivered event. */
  cpu: CpuPerEvent;
}

export interface SweepRun {
  label: 'fresh' | 'after burst';
  phases: SweepPhase[];
}

export interface SweepOutput {
  runs: SweepRun[];
  burst?: { events: number; ingestPerSec: number; drainedSeconds: number };
  /** Why ingest requests failed (status and start of the body, or the socket error), with counts. */
  failureReasons: Record<string, number>;
}

const now = () => performance.timeOrigin + performance.now();
const FILLER = 'x'.repeat(900);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function figures(values: number[]): Figures {
  const s = [...values].sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 100) / 100;
  return { p50: round(percentile(s, 50)), p99: round(percentile(s, 99)), max: round(s[s.length - 1] ?? 0) };
}

serveLoadProcess<SweepInput, SweepOutput>(async (input) => {
  let opened = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024, keepAliveMsecs: 60_000 });
  const service = new URL(input.serviceUrl);

  /** Arrival time at the receiver, by event sequence number. */
  const arrived = new Map<number, number>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const t = now();
      res.writeHead(200, { 'content-length': 0 });
      res.end();
      try {
        const { seq, sentAt } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (typeof seq === 'number' && !arrived.has(seq)) arrived.set(seq, t - sentAt);
      } catch {
        // not one of ours
      }
    });
  });
  receiver.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;

  /**
   * One request: `body(stamp)` is built when the socket is ready to take it (new connections
   * are connected first), and the answer time is measured from that stamp.
   */
  function request(method: string, path: string, headers: Record<string, string>, body: ((stamp: number) => string) | null): Promise<{ status: number; text: string; stamp: number; ms: number }> {
    return new Promise((resolve, reject) => {
      let stamp = 0;
      const req = http.request({ host: service.hostname, port: service.port, method, path, agent, headers });
      req.on('socket', (socket) => {
        const write = () => {
          stamp = now();
          if (body) {
            const b = body(stamp);
            req.setHeader('content-length', Buffer.byteLength(b));
            req.end(b);
          } else req.end();
        };
        if (socket.connecting) {
          opened++;
          socket.setNoDelay(true);
          socket.once('connect', write);
        } else write();
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text, stamp, ms: now() - stamp }));
      });
      req.setTimeout(60_000, () => req.destroy(new Error('timeout')));
      req.on('error', reject);
    });
  }

  const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
  const created = await request('POST', '/v1/webhooks', auth, () => JSON.stringify({ name: 'sweep', url: `${receiverUrl}/hook`, maxInFlight: input.maxInFlight }));
  if (created.status !== 200 && created.status !== 201) throw new Error(`create webhook: ${created.status} ${created.text}`);
  const wh = JSON.parse(created.text);
  const ingestPath = `/i/${wh.publicId}`;
  const ingestHeaders = { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' };

  let seq = 0;
  let failures = 0;
  /** Events answered 202: the receiver waits for these (a refused or failed one never arrives). */
  let accepted = 0;
  /** Why requests failed, with counts. */
  const failureReasons = new Map<string, number>();
  const fail = (why: string) => {
    failures++;
    failureReasons.set(why, (failureReasons.get(why) ?? 0) + 1);
  };
  const event = (n: number) => (stamp: number) => JSON.stringify({ sentAt: stamp, seq: n, type: 'order.created', data: { note: FILLER } });
  /** When each event was due, relative to its phase's start (s). */
  const dueAt = new Map<number, number>();
  async function ingest(n: number, answers?: number[]) {
    try {
      const r = await request('POST', ingestPath, ingestHeaders, event(n));
      if (r.status !== 202) fail(`HTTP ${r.status} ${r.text.slice(0, 80)}`);
      else {
        accepted++;
        answers?.push(r.ms);
      }
    } catch (e) {
      fail((e as Error).message);
    }
  }
  async function waitArrived(count: number, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs;
    while (arrived.size < count && Date.now() < deadline) await sleep(20);
  }

  /** `total` events at `rate`/s on schedule; resolves when all were answered. */
  async function paced(rate: number, total: number, onEach?: (n: number) => Promise<void>) {
    const start = performance.now() + 5;
    const pending: Promise<void>[] = [];
    const lag: number[] = [];
    for (let i = 0; i < total; ) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait - 0.5);
      // Everything due by now goes out at once: a late timer never lowers the rate.
      while (i < total && start + (i * 1000) / rate <= performance.now()) {
        lag.push(performance.now() - (start + (i * 1000) / rate));
        if (onEach) dueAt.set(seq, i / rate);
        pending.push(onEach ? onEach(seq++) : ingest(seq++));
        i++;
      }
    }
    await Promise.all(pending);
    return { lag, seconds: (performance.now() - start) / 1000 };
  }

  async function sweep(label: SweepRun['label']): Promise<SweepRun> {
    const phases: SweepPhase[] = [];
    for (const rate of input.rates) {
      const first = seq;
      const total = Math.round(rate * input.seconds);
      const answers: number[] = [];
      const failedBefore = failures;
      const openedBefore = opened;
      const eld = monitorEventLoopDelay({ resolution: 5 });
      eld.enable();
      const cpuBefore = sampleCpu(input.cpu);
      const probes: number[] = [];
      let probing = rate === input.healthzRate;
      const prober = (async () => {
        while (probing) {
          void request('GET', '/healthz', {}, null).then((r) => r.status === 200 && probes.push(r.ms), () => {});
          await sleep(input.healthzEveryMs);
        }
      })();
      const startedAt = new Date().toISOString();
      const { lag, seconds } = await paced(rate, total, (n) => ingest(n, answers));
      probing = false;
      await prober;
      eld.disable();
      await waitArrived(accepted, 20_000);
      const cpuAfter = sampleCpu(input.cpu);
      const e2e: number[] = [];
      const slowPerSecond = Array.from({ length: Math.ceil(input.seconds) }, () => 0);
      for (let n = first; n < first + total; n++) {
        const ms = arrived.get(n);
        if (ms !== undefined) e2e.push(ms);
        if (ms === undefined || ms > 100) slowPerSecond[Math.min(slowPerSecond.length - 1, Math.floor(dueAt.get(n) ?? 0))]++;
        dueAt.delete(n);
      }
      phases.push({
        rate,
        sent: total,
        delivered: e2e.length,
        failures: failures - failedBefore,
        sentPerSec: total / seconds,
        ingest: figures(answers),
        e2e: figures(e2e),
        senderLag: figures(lag),
        healthz: probes.length ? { ...figures(probes), probes: probes.length } : undefined,
        slowPerSecond,
        loadLoopDelayP99Ms: Math.round(eld.percentile(99) / 1e4) / 100,
        connectionsOpened: opened - openedBefore,
        startedAt,
        cpu: cpuPerEvent(cpuBefore, cpuAfter, e2e.length),
      });
      // A phase the service could not keep up with leaves a backlog: let it drain first.
      await sleep(1_000);
    }
    return { label, phases };
  }

  try {
    const runs: SweepRun[] = [];
    await paced(input.rates[0], input.warmupEvents);
    await waitArrived(accepted, 30_000);
    runs.push(await sweep('fresh'));
    let burst: SweepOutput['burst'];
    if (input.burstEvents > 0) {
      const first = seq;
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: input.burstConnections }, async () => {
          while (next < input.burstEvents) {
            next++;
            await ingest(seq++);
          }
        }),
      );
      const ingested = performance.now();
      await waitArrived(accepted, 120_000);
      burst = { events: input.burstEvents, ingestPerSec: input.burstEvents / ((ingested - started) / 1000), drainedSeconds: (performance.now() - started) / 1000 };
      await sleep(2_000);
      runs.push(await sweep('after burst'));
    }
    return { runs, burst, failureReasons: Object.fromEntries(failureReasons) };
  } finally {
    agent.destroy();
    receiver.closeAllConnections();
    receiver.close();
  }
});
