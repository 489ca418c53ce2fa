import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createScenarioDatabase } from '../database.ts';
import { startTimingReceiver, percentile } from '../load/receiver.ts';
import { startTsProcess, type TrackedProcess } from '../processes.ts';
import type { Result, Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

/** The target: forwarding through `relay listen` adds at most this much to the p50. */
const TARGET_P50_OVERHEAD_MS = 5;
/** Each event waits this long for its delivery at most. */
const DELIVERY_TIMEOUT_MS = 15_000;

interface Webhook {
  id: string;
  publicId: string;
  ingestSecret: string;
}

async function createWebhook(ctx: ScenarioContext, body: Record<string, unknown>): Promise<Webhook> {
  const res = await fetch(`${ctx.serviceUrl}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`creating a webhook: ${res.status} ${await res.text()}`);
  return (await res.json()) as Webhook;
}

/** `relay listen` as the developer runs it, forwarding to the receiver; resolves once it is connected. */
async function startListen(ctx: ScenarioContext, webhookId: string, forwardTo: string): Promise<TrackedProcess> {
  const proc = startTsProcess('bin/relay.mjs', {
    label: 'relay listen',
    args: ['listen', webhookId, '--forward-to', forwardTo, '--json'],
    env: { RELAY_BASE_URL: ctx.serviceUrl, RELAY_API_KEY: ctx.apiKey, NODE_ENV: 'production' },
  });
  let out = '';
  proc.child.stdout!.on('data', (c) => (out += c));
  const deadline = Date.now() + 60_000;
  while (!out.includes('"type":"ready"')) {
    if (proc.child.exitCode !== null || Date.now() > deadline) {
      await proc.stop();
      throw new Error(`relay listen did not connect:\n${proc.tail()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return proc;
}

/**
 * Ingest → receiver latency of `webhook`'s next event: one event at a time, so no delivery waits
 * behind another. The receiver records when each webhook-id (the event id) first arrives.
 */
async function oneDelivery(ctx: ScenarioContext, receiver: Awaited<ReturnType<typeof startTimingReceiver>>, webhook: Webhook, seq: number): Promise<{ ms: number; deliveryId: string }> {
  const sent = performance.timeOrigin + performance.now();
  const res = await fetch(`${ctx.serviceUrl}/i/${webhook.publicId}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${webhook.ingestSecret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'bench.listen', seq }),
  });
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${await res.text()}`);
  const { eventId, deliveryId } = (await res.json()) as { eventId: string; deliveryId: string };
  const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
  for (;;) {
    const at = receiver.firstSeen.get(eventId);
    if (at !== undefined) return { ms: at - sent, deliveryId };
    if (Date.now() > deadline) throw new Error(`event ${eventId} was not delivered within ${DELIVERY_TIMEOUT_MS} ms`);
    await new Promise((r) => setImmediate(r));
  }
}

interface Target {
  serviceUrl: string;
  apiKey: string;
  databaseUrl: string;
}

interface Samples {
  /** Ingest → receiver, ms. */
  direct: number[];
  cli: number[];
  /** Ingest → the attempt recorded (the delivery's completed_at − created_at, both the database's clock), ms. */
  directDone: number[];
  cliDone: number[];
}

/** completed_at − created_at of each delivery, once all are recorded (the recorder writes in batches). */
async function recordedMs(databaseUrl: string, ids: string[]): Promise<number[]> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { rows } = await db.query<{ ms: number | null }>(
        `SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms FROM deliveries WHERE id = ANY($1::text[])`,
        [ids],
      );
      if (rows.length === ids.length && rows.every((r) => r.ms !== null)) return rows.map((r) => Number(r.ms)).sort((a, b) => a - b);
      if (Date.now() > deadline) throw new Error(`${ids.length - rows.filter((r) => r.ms !== null).length} deliveries not recorded within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await db.end();
  }
}

/** Alternating pairs (direct, then through listen) for `seconds`, at least one pair. */
async function measure(ctx: ScenarioContext, target: Target, label: string): Promise<Samples> {
  const receiver = await startTimingReceiver();
  const at = { ...ctx, serviceUrl: target.serviceUrl, apiKey: target.apiKey };
  let listen: TrackedProcess | undefined;
  try {
    const direct = await createWebhook(at, { name: 'listen-overhead direct', url: `${receiver.url}/direct` });
    const cli = await createWebhook(at, { name: 'listen-overhead cli', destination: { type: 'cli', config: {} } });
    listen = await startListen(at, cli.id, `${receiver.url}/listen`);
    const samples = { direct: [] as number[], cli: [] as number[] };
    const ids = { direct: [] as string[], cli: [] as string[] };
    let seq = 0;
    const phase = async (seconds: number, keep: boolean) => {
      const end = Date.now() + seconds * 1000;
      do {
        if (ctx.signal.aborted) throw new Error('aborted');
        const d = await oneDelivery(at, receiver, direct, seq++);
        const c = await oneDelivery(at, receiver, cli, seq++);
        if (keep) {
          samples.direct.push(d.ms);
          samples.cli.push(c.ms);
          ids.direct.push(d.deliveryId);
          ids.cli.push(c.deliveryId);
        }
      } while (Date.now() < end);
    };
    // The first pairs warm the runner's and listen's connections, whatever --warmup says.
    await phase(ctx.settings.warmup, false);
    await phase(ctx.settings.duration, true);
    samples.direct.sort((a, b) => a - b);
    samples.cli.sort((a, b) => a - b);
    const done = { directDone: await recordedMs(target.databaseUrl, ids.direct), cliDone: await recordedMs(target.databaseUrl, ids.cli) };
    const plus = (a: number[], b: number[]) => signed(percentile(b, 50) - percentile(a, 50));
    ctx.log(`${label}: listen adds ${plus(samples.direct, samples.cli)} ms to the p50 until the receiver, ${plus(done.directDone, done.cliDone)} ms until the attempt is recorded (${samples.direct.length} pairs)`);
    return { ...samples, ...done };
  } finally {
    await listen?.stop();
    await receiver.close();
  }
}

/** +1.5 or −0.7: a difference of medians, which noise may make negative. */
const signed = (x: number) => `${x < 0 ? '−' : '+'}${Math.abs(x).toFixed(1)}`;

function results(label: string, notes: string, m: Samples, seconds: number): Result[] {
  const p50 = (x: number[]) => percentile(x, 50);
  const overhead = p50(m.cli) - p50(m.direct);
  const overheadDone = p50(m.cliDone) - p50(m.directDone);
  // Judged by the larger: the request reaching the receiver, and the answer back until the attempt is recorded.
  const meets = Math.max(overhead, overheadDone) <= TARGET_P50_OVERHEAD_MS ? 'meets' : 'misses';
  const direct = `listen-overhead ${label}: direct (webhook destination)`;
  const recorded = (x: number[]) => `recorded after p50 ${p50(x).toFixed(1)} ms, p99 ${percentile(x, 99).toFixed(1)} ms`;
  return [
    {
      name: direct,
      throughput: m.direct.length / seconds,
      unit: 'deliveries/s',
      p50Ms: p50(m.direct),
      p99Ms: percentile(m.direct, 99),
      requests: m.direct.length,
      notes: `ingest → receiver, one event at a time; ${notes}; the attempt ${recorded(m.directDone)}`,
    },
    {
      name: `listen-overhead ${label}: through relay listen (cli destination)`,
      throughput: m.cli.length / seconds,
      unit: 'deliveries/s',
      p50Ms: p50(m.cli),
      p99Ms: percentile(m.cli, 99),
      requests: m.cli.length,
      baseline: direct,
      notes:
        `${signed(overhead)} ms at p50 over direct until the receiver; the attempt ${recorded(m.cliDone)}, ${signed(overheadDone)} ms over direct ` +
        `(the answer's way back included); ${meets} the target (≤ ${TARGET_P50_OVERHEAD_MS} ms, the larger of the two)`,
    },
  ];
}

/**
 * The same receiver, reached two ways: a `webhook` destination (the runner's own HTTP request)
 * and a `cli` destination (the runner hands the request to a `relay listen` process, which sends
 * it and reports the answer back). Events alternate between the two, one at a time. First on the
 * run's service (API and job runner in one process, as `npm start`: the hand-off stays in memory),
 * then on `start:api` and `start:worker` apart (through PostgreSQL NOTIFY both ways).
 */
const listenOverhead: Scenario = {
  name: 'listen-overhead',
  description:
    'Ingest → receiver latency of one event at a time, alternating between a webhook destination posting to a loopback receiver (direct) ' +
    'and a cli destination forwarded to the same receiver by a `relay listen` child process over the GraphQL WebSocket. ' +
    'One process (npm start: the runner hands over to the session in memory), then start:api and start:worker apart (the hand-off and the answer through PostgreSQL NOTIFY). ' +
    'Also ingest → the attempt recorded (completed_at − created_at), which includes the answer\'s way back. ' +
    `Target: listen adds ≤ ${TARGET_P50_OVERHEAD_MS} ms to the p50 of both.`,
  timeoutMs: (s) => (s.warmup + s.duration) * 4 * 1000 + 4 * 60_000,
  async run(ctx) {
    const seconds = ctx.settings.duration;
    const one = await measure(ctx, { serviceUrl: ctx.serviceUrl, apiKey: ctx.apiKey, databaseUrl: ctx.databaseUrl }, 'one process');
    const db = await createScenarioDatabase(ctx.databaseUrl, 'listen');
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-listen-'));
    // The runner decrypts the signing secrets the API process created.
    const env = { SECRETS_KEY: randomBytes(32).toString('base64') };
    let api: Awaited<ReturnType<typeof startService>> | undefined;
    let worker: ReturnType<typeof startWorker> | undefined;
    try {
      api = await startService(db.url, path.join(dataDir, 'api'), { script: 'src/api.ts', label: 'API only (listen-overhead)', env });
      worker = startWorker(db.url, path.join(dataDir, 'worker'), { env });
      const project = await createBenchProject(db.url);
      const split = await measure(ctx, { serviceUrl: api.url, apiKey: project.apiKey, databaseUrl: db.url }, 'split');
      return [
        ...results('one process', 'API and job runner in one process (npm start)', one, seconds),
        ...results('split', 'start:api and start:worker apart, sharing only PostgreSQL', split, seconds),
      ];
    } finally {
      await worker?.stop();
      await api?.stop();
      await db.dispose().catch((e) => ctx.log(`could not drop the listen database: ${e.message}`));
    }
  },
};

export default listenOverhead;
