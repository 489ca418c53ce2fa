// Split processes (start:api + start:worker) on an external PostgreSQL that restarts under steady
// ingest; and the small ingest rate shared by two API processes. Time is part of the point (back
// within 10 s): this file runs in the project that runs alone (vitest.config.ts).
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, chmod } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../src/db/client.ts';
import { freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.ts';
import { createProject } from '../src/projects/service.ts';
import { createTestDatabase } from './support/database.ts';
import { startProcess, stopProcess, waitStatus, type ServiceProcess } from './support/processes.ts';
import { startReceiver } from './support/receiver.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const started: ServiceProcess[] = [];
let dataRoot: string;
beforeAll(async () => {
  dataRoot = await mkdtemp(path.join(os.tmpdir(), 'outage-data-'));
});
afterAll(async () => {
  await Promise.all(started.map((p) => stopProcess(p)));
  await rm(dataRoot, { recursive: true, force: true });
});
// What a split deployment sets: one SECRETS_KEY for all its processes (a webhook's secrets are
// written by the API and read by the runner), deliveries to the test's loopback receiver.
const DEPLOYMENT = { SECRETS_KEY: randomBytes(32).toString('base64'), ALLOW_PRIVATE_DESTINATIONS: 'true' };

function split(entry: 'api' | 'worker', databaseUrl: string, port = 0) {
  const p = startProcess(entry, { ...DEPLOYMENT, DATABASE_URL: databaseUrl, DATA_DIR: path.join(dataRoot, String(started.length)), PORT: String(port), WORKER_POLL_INTERVAL_MS: '100' });
  started.push(p);
  return p;
}

async function projectOn(databaseUrl: string, tier: string) {
  const db = connectDatabase(databaseUrl, 2);
  try {
    const { secret } = await createProject({ db } as never, { name: 'ops', tier });
    return secret;
  } finally {
    await db.close();
  }
}

async function createWebhook(apiPort: number, key: string, url: string, retryPolicy?: object) {
  const res = await fetch(`http://127.0.0.1:${apiPort}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, retryPolicy }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { ingestUrl: string; ingestSecret: string };
}

describe('PostgreSQL restarting under steady ingest (start:api + start:worker)', () => {
  let dir: string;
  let cluster: EmbeddedDatabase;
  let pgPort: number;
  let dataDir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'outage-'));
    await chmod(dir, 0o755);
    dataDir = path.join(dir, 'pg');
    pgPort = await freePort();
    cluster = await startEmbeddedPostgres(dataDir, { port: pgPort, exclusive: true });
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query('CREATE DATABASE app');
    await admin.end();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(started.map((p) => stopProcess(p)));
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const postmaster = () => Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  async function waitGone(pid: number) {
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(50)) {
      try {
        process.kill(pid, 0);
      } catch {
        return;
      }
    }
    throw new Error('postmaster did not stop');
  }
  /** Starts the cluster again on its port (a killed postmaster's backends may hold its memory a moment). */
  async function restart() {
    for (let i = 0; ; i++) {
      try {
        cluster = await startEmbeddedPostgres(dataDir, { port: pgPort, exclusive: true });
        return Date.now();
      } catch (e) {
        if (i > 40) throw e;
        await sleep(250);
      }
    }
  }

  it('answers 503 unavailable with Retry-After: 2 (never 500, never no answer) while it is away, loses no accepted event, and both processes recover by themselves within 10 s', async () => {
    const databaseUrl = cluster.url.replace(/\/postgres$/, '/app');
    const apiPort = await freePort();
    const api = split('api', databaseUrl, apiPort);
    await waitStatus(apiPort, '/readyz', 200, 60_000, api);
    const worker = split('worker', databaseUrl);
    const receiver = await startReceiver();
    const key = await projectOn(databaseUrl, 'enterprise'); // 100 events/s: the 50/s of this test all fit
    const hook = await createWebhook(apiPort, key, `${receiver.url}/hook`, { maxAttempts: 20, initialDelayMs: 200, maxDelayMs: 1000 });
    const ingestPath = new URL(hook.ingestUrl).pathname;

    // 50 events/s, each request on its own, none waiting for another. Every answer (or the
    // request's failure) is kept, and checked once all have settled.
    const statuses = new Map<number, number>();
    const refusals: { status: number; code: unknown; retryAfter: string | null }[] = [];
    const failures: string[] = [];
    const accepted = new Set<string>();
    const acceptedAt: { id: string; at: number }[] = [];
    const pending = new Set<Promise<void>>();
    let seq = 0;
    const send = () => {
      const n = seq++;
      const p = fetch(`http://127.0.0.1:${apiPort}${ingestPath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-webhook-secret': hook.ingestSecret },
        body: JSON.stringify({ n }),
        signal: AbortSignal.timeout(15_000),
      })
        .then(async (res) => {
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const text = await res.text();
          let body: any = null;
          try {
            body = JSON.parse(text);
          } catch {
            /* checked below: every refusal has a JSON error body */
          }
          if (res.status === 202) {
            accepted.add(body?.eventId);
            acceptedAt.push({ id: body?.eventId, at: Date.now() });
          } else refusals.push({ status: res.status, code: body?.error?.code, retryAfter: res.headers.get('retry-after') });
        })
        .catch((err: Error) => {
          failures.push(`request ${n}: ${err.name}: ${err.message}`);
        })
        .finally(() => pending.delete(p));
      pending.add(p);
    };
    const timer = setInterval(send, 20);
    // The runner is up once the first events arrive.
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && receiver.received.length === 0; ) await sleep(50);
    try {
      await sleep(2_000);
      // A fast shutdown, then back.
      let pid = postmaster();
      process.kill(pid, 'SIGINT');
      await waitGone(pid);
      await waitStatus(apiPort, '/readyz', 503, 5_000, api);
      await sleep(1_500);
      let back = await restart();
      expect(Date.now() - back + (await waitStatus(apiPort, '/readyz', 200, 10_000, api))).toBeLessThan(10_000);
      await sleep(2_000);
      // The postmaster killed outright.
      pid = postmaster();
      process.kill(pid, 'SIGKILL');
      await waitGone(pid);
      await sleep(1_500);
      back = await restart();
      expect(Date.now() - back + (await waitStatus(apiPort, '/readyz', 200, 10_000, api))).toBeLessThan(10_000);
      await sleep(3_000);
      // The runner is back too: an event accepted now is delivered within 10 s of the database's return.
      const since = Date.now();
      await sleep(200);
      const after = acceptedAt.find((a) => a.at > since);
      expect(after, JSON.stringify([...statuses]) + api.output().slice(-2000)).toBeTruthy();
      for (const deadline = back + 10_000; Date.now() < deadline && !receiver.received.some((r) => r.headers['webhook-id'] === after!.id); ) await sleep(50);
      expect(receiver.received.some((r) => r.headers['webhook-id'] === after!.id), worker.output().slice(-6000)).toBe(true);
    } finally {
      clearInterval(timer);
      await Promise.all(pending);
    }

    // Every request was answered (none failed or timed out), and every refusal was the outage's.
    expect(failures, JSON.stringify([...statuses])).toEqual([]);
    expect(accepted.has(undefined as never), 'a 202 without an eventId').toBe(false);
    expect(refusals.filter((r) => r.status !== 503 || r.code !== 'unavailable' || r.retryAfter !== '2'), JSON.stringify([...statuses])).toEqual([]);
    expect(statuses.get(202) ?? 0, JSON.stringify([...statuses])).toBeGreaterThan(300);
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
    // Every event answered 202 is delivered (at least once).
    const delivered = () => new Set(receiver.received.map((r) => String(r.headers['webhook-id'])));
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && [...accepted].some((id) => !delivered().has(id)); ) await sleep(100);
    expect([...accepted].filter((id) => !delivered().has(id))).toEqual([]);
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();
    await receiver.close();
  }, 120_000);
});

describe('a small ingest rate limit across two API processes', () => {
  it('lets at most the limit through per one-second window, whichever process takes the request', async () => {
    const databaseUrl = await createTestDatabase();
    const [portA, portB] = [await freePort(), await freePort()];
    const a = split('api', databaseUrl, portA);
    await waitStatus(portA, '/readyz', 200, 60_000, a);
    const b = split('api', databaseUrl, portB);
    await waitStatus(portB, '/readyz', 200, 60_000, b);
    const key = await projectOn(databaseUrl, 'free'); // 3 requests/s
    const hook = await createWebhook(portA, key, 'http://127.0.0.1:9/unused');
    const ingestPath = new URL(hook.ingestUrl).pathname;
    const ingest = (port: number) =>
      fetch(`http://127.0.0.1:${port}${ingestPath}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-webhook-secret': hook.ingestSecret }, body: '{}' }).then(async (r) => ({
        status: r.status,
        at: Date.now(),
        body: await r.json(),
      }));
    // Both processes warm (webhook lookups kept), then 30 requests within about a second, alternating.
    await Promise.all([ingest(portA), ingest(portB)]);
    await sleep(1_100);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => sleep(i * 30).then(() => ingest(i % 2 ? portA : portB))));
    expect(results.every((r) => r.status === 202 || (r.status === 429 && r.body.error.quota === 'ingest_rate'))).toBe(true);
    // Windows are whole seconds (the database's clock is this machine's): at most 3 in each one the requests spanned.
    const windows = Math.floor(Math.max(...results.map((r) => r.at)) / 1000) - Math.floor((results[0].at - 50) / 1000) + 1;
    const admitted = results.filter((r) => r.status === 202).length;
    expect(admitted).toBeGreaterThanOrEqual(3);
    expect(admitted).toBeLessThanOrEqual(3 * windows);
    expect(windows).toBeLessThanOrEqual(3);
  }, 120_000);
});
