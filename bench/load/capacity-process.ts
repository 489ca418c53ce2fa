// Load process for the capacity scenario: a loopback receiver answering 200 at once, a few
// webhooks on their defaults, and a closed loop of ingest requests spread over the API processes
// at the highest rate the whole setup sustains (ingest held back while the backlog exceeds a bound,
// so that ingest and delivery run at the same rate). Over one window it reads the CPU of the API
// processes, the job runners, PostgreSQL and this process (load + receiver), the WAL written and
// the peak of PostgreSQL connections.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { sampleCpu } from '../cpu.ts';
import { kilobyteEvent as payload, post } from './http-post.ts';
import { serveLoadProcess } from './protocol.ts';
import { percentile } from './receiver.ts';

export interface CapacityInput {
  apiUrls: string[];
  apiKey: string;
  databaseUrl: string;
  webhooks: number;
  connections: number;
  warmupSeconds: number;
  seconds: number;
  /** Ingest waits while more than this many events are ingested and not yet delivered. */
  maxBacklog: number;
  apiPids: number[];
  workerPids: number[];
  postmasterPid?: number;
}

export interface CapacityOutput {
  seconds: number;
  ingested: number;
  delivered: number;
  /** Requests the receiver answered (a retried delivery counts twice). */
  requests: number;
  failures: number;
  ingestP50Ms: number;
  ingestP99Ms: number;
  /** CPU ms over the window; undefined when it could not be read. */
  cpuMs: { api?: number; runner?: number; postgres?: number; load: number };
  walBytes: number;
  /** Highest count of pg_stat_activity rows on the database (this process's own left out). */
  peakConnections: number;
  /** The backlog (ingested, not delivered) when the window closed. */
  backlogAtEnd: number;
  /** Cores busy over the window on the whole machine (/proc/stat), this setup's processes and any other work. */
  machineBusyCores?: number;
}

/** /proc/stat's first line: [busy, total] ticks of all cores; undefined off Linux. */
function machineTicks(): [number, number] | undefined {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    // idle and iowait are the cores' idle time.
    return [total - f[3] - f[4], total];
  } catch {
    return undefined;
  }
}

serveLoadProcess<CapacityInput, CapacityOutput>(async (input) => {
  const seen = new Set<string>();
  let requests = 0;
  const server = http.createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      requests++;
      const id = String(req.headers['webhook-id'] ?? '');
      if (id) seen.add(id);
      res.writeHead(200);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const db = new pg.Client({ connectionString: input.databaseUrl });
  await db.connect();
  try {
    const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
    const targets: { url: string; headers: Record<string, string> }[] = [];
    for (let i = 0; i < input.webhooks; i++) {
      // Nothing but a name and a url: the contract's defaults (maxInFlight 10).
      const created = await post(`${input.apiUrls[0]}/v1/webhooks`, auth, JSON.stringify({ name: `capacity-${i}`, url: `${receiverUrl}/hook/${i}` }));
      if (created.status !== 200 && created.status !== 201) throw new Error(`create webhook: ${created.status} ${created.body}`);
      const wh = JSON.parse(created.body);
      targets.push({ url: `/i/${wh.publicId}`, headers: { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' } });
    }

    let ingested = 0;
    let failures = 0;
    let measuring = false;
    let stop = false;
    const latencies: number[] = [];
    let peakConnections = 0;
    const countConnections = async () => {
      const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      peakConnections = Math.max(peakConnections, rows[0].n);
    };
    const poller = setInterval(() => void countConnections().catch(() => {}), 250);

    const loops = Array.from({ length: input.connections }, async (_, c) => {
      // Connection c: API process c mod N, webhook c mod W (the two spread independently).
      const api = input.apiUrls[c % input.apiUrls.length];
      const target = targets[Math.floor(c / input.apiUrls.length) % targets.length];
      let i = c;
      while (!stop) {
        if (ingested - seen.size > input.maxBacklog) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        const t0 = performance.now();
        const res = await post(`${api}${target.url}`, target.headers, payload(i)).catch((e: Error) => ({ status: 0, body: e.message }));
        i += input.connections;
        if (res.status !== 202) {
          failures++;
          if (failures > 100) throw new Error(`more than 100 ingest requests failed, the last: ${res.status} ${res.body}`);
          continue;
        }
        ingested++;
        if (measuring) latencies.push(performance.now() - t0);
      }
    });
    const loading = Promise.all(loops);
    loading.catch(() => {});
    const failed = new Promise<never>((_, reject) => void loading.catch(reject));
    const sleep = (s: number) => Promise.race([new Promise((r) => setTimeout(r, s * 1000)), failed]);

    await sleep(input.warmupSeconds);
    const walLsn = async () => (await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
    const sample = () => ({
      api: sampleCpu({ service: input.apiPids }).serviceMs,
      runner: sampleCpu({ service: input.workerPids, postmaster: input.postmasterPid }),
      load: process.cpuUsage(),
      machine: machineTicks(),
      ingested,
      delivered: seen.size,
      requests,
      failures,
      at: performance.now(),
    });
    const lsn0 = await walLsn();
    const s0 = sample();
    measuring = true;
    await sleep(input.seconds);
    const s1 = sample();
    const lsn1 = await walLsn();
    measuring = false;
    stop = true;
    clearInterval(poller);
    await loading;
    const walBytes = Number((await db.query<{ d: string }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS d', [lsn1, lsn0])).rows[0].d);
    const diff = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : b - a);
    latencies.sort((a, b) => a - b);
    return {
      seconds: (s1.at - s0.at) / 1000,
      ingested: s1.ingested - s0.ingested,
      delivered: s1.delivered - s0.delivered,
      requests: s1.requests - s0.requests,
      failures: s1.failures - s0.failures,
      ingestP50Ms: percentile(latencies, 50),
      ingestP99Ms: percentile(latencies, 99),
      cpuMs: {
        api: diff(s0.api, s1.api),
        runner: diff(s0.runner.serviceMs, s1.runner.serviceMs),
        postgres: diff(s0.runner.postgresMs, s1.runner.postgresMs),
        load: (s1.load.user + s1.load.system - s0.load.user - s0.load.system) / 1000,
      },
      walBytes,
      peakConnections,
      backlogAtEnd: s1.ingested - s1.delivered,
      machineBusyCores: s0.machine && s1.machine ? ((s1.machine[0] - s0.machine[0]) / (s1.machine[1] - s0.machine[1])) * os.availableParallelism() : undefined,
    };
  } finally {
    await db.end().catch(() => {});
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
