// Issue 31: the service behind PgBouncer in transaction mode, as managed PostgreSQL puts it in
// front (CONTRACT §14). DATABASE_URL is PgBouncer (Debian's 1.18: no prepared statements in
// transaction mode), DATABASE_DIRECT_URL the server: two `start:api` processes through PgBouncer
// and two `start:worker` processes given the same two variables (they work on the server), then
// `npm start` and the CLI the same way. The database's default time zone is not UTC, so that a
// session that misses its time zone shows.
// Without pgbouncer installed this file is skipped with a notice, except in CI (`CI` set), where
// it fails: `apt-get install -y pgbouncer`.
import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createClient, type Client as WsClient } from 'graphql-ws';
import nodemailer from 'nodemailer';
import pg from 'pg';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../src/db/client.ts';
import { freePort } from '../src/db/embedded.ts';
import { droppedWith, dropHistoryPartition, followsAnother, HISTORY_PARTITIONED, listHistoryPartitions } from '../src/retention/partitions.ts';
import { waitFor } from './support/app.ts';
import { createTestDatabase, serverUrl } from './support/database.ts';
import { findPgBouncer, startPgBouncer, type PgBouncer } from './support/pgbouncer.ts';
import { runCli, startProcess, stopProcess, waitStatus, printedKey, type ServiceProcess } from './support/processes.ts';
import { startReceiver, type Received } from './support/receiver.ts';

const BINARY = findPgBouncer();
const CI = !!process.env.CI;
if (!BINARY && !CI) console.warn('operations.pgbouncer: SKIPPED, pgbouncer is not installed (apt-get install -y pgbouncer); CI fails here');

describe.runIf(!BINARY && CI)('PgBouncer in CI', () => {
  it('is installed (apt-get install -y pgbouncer)', () => {
    expect.fail('pgbouncer is not installed: the PgBouncer process tests cannot run (apt-get install -y pgbouncer)');
  });
});

/** PgBouncer 1.21 and later can keep protocol-level prepared statements in transaction mode (max_prepared_statements). */
const TRACKS_PREPARED = (() => {
  if (!BINARY) return false;
  const [major, minor] = /PgBouncer (\d+)\.(\d+)/.exec(execFileSync(BINARY, ['--version'], { encoding: 'utf8' }))!.slice(1).map(Number);
  return major > 1 || minor >= 21;
})();

const SECRETS_KEY = 'dGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcy1sb25nISE=';
const DOMAIN = 'ingest.test';
const DEFAULT_TZ = 'Pacific/Chatham';

let bouncer: PgBouncer;
let dir: string;
const processes: ServiceProcess[] = [];

/** A fresh test database whose sessions default to a time zone other than UTC; its direct and pooled URLs. */
async function database() {
  const direct = await createTestDatabase();
  const name = new URL(direct).pathname.slice(1);
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`ALTER DATABASE ${name} SET TimeZone = '${DEFAULT_TZ}'`);
  await admin.end();
  return { direct, pooled: bouncer.url(name) };
}

/** What every process gets: the pooler in DATABASE_URL, the server in DATABASE_DIRECT_URL, the test's own settings. */
const serviceEnv = (db: { direct: string; pooled: string }, extra: Record<string, string> = {}) => ({
  DATABASE_URL: db.pooled,
  DATABASE_DIRECT_URL: db.direct,
  SECRETS_KEY,
  ALLOW_PRIVATE_DESTINATIONS: 'true',
  EMAIL_DOMAIN: DOMAIN,
  DATA_DIR: path.join(dir, 'data'),
  // Pools opened on demand: the runners' direct pools would otherwise open ~100 connections at start.
  DATABASE_POOL_MIN: '0',
  ...extra,
});

function started(p: ServiceProcess) {
  processes.push(p);
  return p;
}

/** No process may have met what a pooler breaks. */
function expectNoPoolerErrors(p: ServiceProcess) {
  expect(p.output()).not.toMatch(/prepared statement|unsupported startup parameter|cannot (LISTEN|execute)|advisory lock/i);
}

beforeAll(async () => {
  if (!BINARY) return;
  dir = await mkdtemp(path.join(os.tmpdir(), 'pgbouncer-test-'));
  await chmod(dir, 0o755);
  bouncer = await startPgBouncer(serverUrl(), { serverPoolSize: 8 });
});
afterAll(async () => {
  await Promise.all(processes.map((p) => stopProcess(p)));
  await bouncer?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!BINARY)('the service behind PgBouncer in transaction mode', () => {
  it('pools on the pooler run named statements unnamed and every session in UTC, Prisma included; direct pools stay on the server', async () => {
    const urls = await database();
    // Control: pg's own named statements. A client that prepared `probe` on one server connection,
    // then another client lent the same server connection: PgBouncer 1.18 passes both Parse messages on.
    if (!TRACKS_PREPARED) {
      const raw = new pg.Pool({ connectionString: urls.pooled, max: 2 });
      const [a, b] = [await raw.connect(), await raw.connect()];
      const probe = { name: 'probe', text: 'SELECT $1::int AS n', values: [1] };
      const outcomes = [];
      for (const c of [a, b, a, b]) outcomes.push(await c.query(probe).then(() => 'ok', (e: Error) => e.message));
      a.release();
      b.release();
      await raw.end();
      expect(outcomes.filter((o) => /prepared statement/.test(o)).length).toBeGreaterThan(0);
      // Nor does a session that sets nothing speak UTC.
      const plain = new pg.Client({ connectionString: urls.pooled });
      await plain.connect();
      expect((await plain.query('SHOW TimeZone')).rows[0].TimeZone).toBe(DEFAULT_TZ);
      await plain.end();
    }

    const db = connectDatabase(urls.pooled, 2, 2, 0, { directUrl: urls.direct, runner: false });
    try {
      expect(db.pooled).toBe(true);
      const [a, b] = [await db.pool.connect(), await db.pool.connect()];
      const probe = { name: 'probe', text: 'SELECT $1::int AS n, current_setting($2) AS tz', values: [1, 'TimeZone'] };
      for (const c of [a, b, a, b, a, b]) expect((await c.query(probe)).rows[0]).toEqual({ n: 1, tz: 'UTC' });
      a.release();
      b.release();
      // Concurrent named statements over more clients than server connections.
      const many = await Promise.all(Array.from({ length: 40 }, (_, i) => db.pool.query({ name: `q${i % 3}`, text: 'SELECT $1::int AS n', values: [i] })));
      expect(many.map((r) => r.rows[0].n)).toEqual(Array.from({ length: 40 }, (_, i) => i));
      expect(await db.prisma.$queryRawUnsafe(`SELECT current_setting('TimeZone') AS tz`)).toEqual([{ tz: 'UTC' }]);
      // Prisma's model queries and a transaction through the pooler.
      const [count] = await db.prisma.$transaction([db.prisma.project.count()]);
      expect(count).toBe(0);
      // The relaxed statements of an API-only process go through the pooler too; session locks go direct.
      expect(db.relaxedPool).toBe(db.pool);
      const backend = async (p: pg.Pool) => (await p.query(`SELECT inet_server_port() AS port`)).rows[0].port;
      expect(await backend(db.direct)).toBe(Number(new URL(urls.direct).port));
      expect((await db.direct.query('SHOW TimeZone')).rows[0].TimeZone).toBe('UTC');
    } finally {
      await db.close();
    }
    expect(bouncer.output()).not.toMatch(/unsupported startup parameter/);
  });

  describe('two start:api through PgBouncer, two start:worker on the server', () => {
    let urls: { direct: string; pooled: string };
    const apis: { port: number; smtpPort: number; proc: ServiceProcess; url: string }[] = [];
    const workers: ServiceProcess[] = [];
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let apiKey: string;
    let projectId: string;
    const fifoFailed = new Set<string>();

    const api = async (i: number, method: string, p: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(apis[i].url + p, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    };
    const createWebhook = async (i: number, body: Record<string, unknown>) => {
      const res = await api(i, 'POST', '/v1/webhooks', { name: 'hook', ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body as { id: string; publicId: string; ingestSecret: string };
    };
    const ingest = async (i: number, wh: { publicId: string; ingestSecret: string }, payload: unknown) => {
      const res = await fetch(`${apis[i].url}/i/${wh.publicId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${wh.ingestSecret}` },
        body: JSON.stringify(payload),
      });
      return { status: res.status, body: (await res.json()) as { eventId?: string; deliveryId?: string; error?: { code: string; quota?: string } } };
    };
    const at = (route: string) => receiver.received.filter((r) => r.url === route);

    beforeAll(async () => {
      urls = await database();
      receiver = await startReceiver((r: Received) => {
        // The FIFO webhook's fifth event fails once: the ones after it must wait for its retry.
        if (r.url === '/fifo' && JSON.parse(r.body.toString()).n === 5 && !fifoFailed.has('5')) {
          fifoFailed.add('5');
          return { status: 500 };
        }
        return { status: 200 };
      });
      for (let i = 0; i < 2; i++) {
        const [port, smtpPort] = [await freePort(), await freePort()];
        const url = `http://127.0.0.1:${port}`;
        apis.push({ port, smtpPort, url, proc: started(startProcess('api', serviceEnv(urls, { PORT: String(port), SMTP_PORT: String(smtpPort), PUBLIC_URL: url }))) });
      }
      for (let i = 0; i < 2; i++) workers.push(started(startProcess('worker', serviceEnv(urls))));
      await Promise.all(apis.map((a) => waitStatus(a.port, '/readyz', 200, 90_000, a.proc)));
      await waitFor(() => workers.every((w) => /job runner started/.test(w.output())), 90_000, 100).catch(() => {
        throw new Error(`the runners did not start:\n${workers.map((w) => w.output().slice(-2000)).join('\n---\n')}`);
      });
      // The CLI through PgBouncer creates the project the tests use, and lifts its ingest rate.
      const created = await runCli(serviceEnv(urls), ['project', 'create', '--name', 'bounced', '--tier', 'enterprise']);
      expect(created.code, created.output).toBe(0);
      const body = JSON.parse(created.stdout) as { apiKey: string; project: { id: string } };
      [apiKey, projectId] = [body.apiKey, body.project.id];
      const quota = await runCli(serviceEnv(urls), ['project', 'set-quota', projectId, 'ingest_rate', '1000000']);
      expect(quota.code, quota.output).toBe(0);
    }, 180_000);
    afterAll(async () => {
      await receiver?.close();
    });

    it('answers REST and GraphQL on both processes', async () => {
      const wh = await createWebhook(0, { url: `${receiver.url}/misc` });
      const got = await api(1, 'GET', `/v1/webhooks/${wh.id}`);
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ id: wh.id, publicId: wh.publicId });
      const gql = await api(1, 'POST', '/graphql', { query: '{ project { id name tier } }' });
      expect(gql.body).toEqual({ data: { project: { id: projectId, name: 'bounced', tier: 'enterprise' } } });
      const paused = await api(1, 'POST', '/graphql', { query: `mutation { pauseWebhook(id: "${wh.id}") { id status } }` });
      expect(paused.body.errors, JSON.stringify(paused.body)).toBeUndefined();
      // The change is seen by the other process at once (its lookups hear of it over LISTEN on the server).
      expect((await api(0, 'GET', `/v1/webhooks/${wh.id}`)).body.status).toBe('paused');
    });

    it('tells a subscriber on API #1 of a delivery ingested through API #2 and delivered by a runner', async () => {
      const wh = await createWebhook(0, { url: `${receiver.url}/sub` });
      const seen: { id: string; status: string }[] = [];
      const client: WsClient = createClient({ url: apis[0].url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
      const connected = new Promise<void>((r) => client.on('connected', () => r()));
      client.subscribe(
        { query: `subscription($w: ID) { deliveryUpdated(webhookId: $w) { id status } }`, variables: { w: wh.id } },
        { next: (v) => seen.push((v.data as any).deliveryUpdated), error: () => {}, complete: () => {} },
      );
      try {
        await connected;
        await new Promise((r) => setTimeout(r, 500));
        const { status, body } = await ingest(1, wh, { hello: 'subscriber' });
        expect(status).toBe(202);
        await waitFor(() => seen.some((d) => d.id === body.deliveryId && d.status === 'succeeded'), 20_000);
        expect(seen.filter((d) => d.id === body.deliveryId).map((d) => d.status)).toEqual(['delivering', 'succeeded']);
        expect(at('/sub')).toHaveLength(1);
      } finally {
        await client.dispose();
      }
    });

    it('ingests a form post with a file and a mail with an attachment, through either process', async () => {
      const wh = await createWebhook(1, { url: `${receiver.url}/channels` });
      const form = new FormData();
      form.append('_secret', wh.ingestSecret);
      form.append('name', 'Ana');
      form.append('cv', new Blob([Buffer.from('%PDF-1.4 bounced')], { type: 'application/pdf' }), 'cv.pdf');
      const posted = await fetch(`${apis[0].url}/f/${wh.publicId}`, { method: 'POST', body: form, redirect: 'manual' });
      const postedBody = await posted.json();
      expect(posted.status, JSON.stringify(postedBody)).toBe(202);

      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: apis[1].smtpPort, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000 } as any);
      const info = await transport.sendMail({ from: 'ana@x.test', to: `${wh.publicId}@${DOMAIN}`, subject: 'bounced', text: 'hello', attachments: [{ filename: 'a.txt', content: 'attached' }] });
      expect(info.response).toMatch(/^250 /);

      await waitFor(() => at('/channels').length >= 2, 20_000);
      const types = at('/channels').map((r) => JSON.parse(r.body.toString()));
      expect(types.map((t) => t.type).sort()).toEqual(['email.received', 'form.submitted']);
      expect(types.find((t) => t.type === 'form.submitted')).toMatchObject({ fields: { name: 'Ana' }, files: [{ filename: 'cv.pdf' }] });
      expect(types.find((t) => t.type === 'email.received')).toMatchObject({ subject: 'bounced' });
      await new Promise((r) => setTimeout(r, 500));
      expect(at('/channels')).toHaveLength(2);
    });

    it('delivers a steady ingest of 400 events across both processes each exactly once, while a day of history is partitioned and one dropped', async () => {
      const wh = await createWebhook(0, { url: `${receiver.url}/steady`, maxInFlight: 20 });
      const N = 400;
      const accepted: string[] = [];
      // The history partitions' DDL on the tables ingest and delivery write (on the server, as the
      // partition job and retention run it): a day 30 days ahead created, then dropped.
      const direct = new pg.Pool({ connectionString: urls.direct, max: 2 });
      const day = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
      const suffix = `_p${day.replaceAll('-', '')}`;
      let ddl: Promise<{ created: string[]; dropped: string[] }> | undefined;
      const partitionAndDrop = async () => {
        // A create that waited too long for a lock (lock_wait 500 ms: the writers go first) skips that
        // table; the partition job tries again on its next run, and so does this, until every table has the day.
        const tables = Number((await direct.query<{ n: string }>('SELECT count(*) AS n FROM history_partitioned_tables()')).rows[0].n);
        const created: string[] = [];
        for (let tries = 0; tries < 30 && created.length < tables; tries++) {
          if (tries) await new Promise((r) => setTimeout(r, 100));
          created.push(...(await direct.query<{ p: string }>('SELECT history_partitions_ensure($1::date, 1) AS p', [day])).rows.map((r) => r.p));
        }
        await new Promise((r) => setTimeout(r, 1_000));
        const dropped: string[] = [];
        // A deliveries day goes with its attempts' and DLQ entries' day.
        for (const p of (await listHistoryPartitions(direct)).filter((x) => x.name.endsWith(suffix) && !followsAnother(x.table))) {
          // A drop that waited too long for a lock gives up (the writers go first): it is tried again, as retention would.
          for (let tries = 0; tries < 30; tries++) {
            if (await dropHistoryPartition(direct, p, {})) {
              dropped.push(...droppedWith(p).map((d) => d.name));
              break;
            }
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        return { created, dropped };
      };
      // 100 events/s for 4 s, alternating between the two API processes.
      const start = Date.now();
      const sends: Promise<void>[] = [];
      for (let n = 0; n < N; n++) {
        if (n === 100) ddl = partitionAndDrop();
        await new Promise((r) => setTimeout(r, Math.max(0, start + n * 10 - Date.now())));
        sends.push(
          ingest(n % 2, wh, { n }).then(({ status, body }) => {
            expect(status, JSON.stringify(body)).toBe(202);
            accepted.push(body.eventId!);
          }),
        );
      }
      await Promise.all(sends);
      expect(new Set(accepted).size).toBe(N);
      await waitFor(() => at('/steady').length >= N, 60_000, 100);
      await new Promise((r) => setTimeout(r, 1_000)); // a duplicate would come now
      const ids = at('/steady').map((r) => r.headers['webhook-id'] as string);
      expect(ids).toHaveLength(N);
      expect(new Set(ids)).toEqual(new Set(accepted));
      expect(at('/steady').map((r) => JSON.parse(r.body.toString()).n).sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i));
      const { created, dropped } = await ddl!;
      await direct.end();
      // Every partitioned history table got the day, and lost it again, while the events came in.
      expect(created.length).toBeGreaterThanOrEqual(HISTORY_PARTITIONED.length);
      expect(created.every((name) => name.endsWith(suffix))).toBe(true);
      expect(dropped.sort()).toEqual([...created].sort());
    }, 120_000);

    it('holds strict FIFO across both processes and both runners, through a failed attempt', async () => {
      const wh = await createWebhook(1, { url: `${receiver.url}/fifo`, deliveryMode: 'strict_fifo', retryPolicy: { initialDelayMs: 100, jitter: false } });
      const N = 30;
      for (let n = 0; n < N; n++) expect((await ingest(n % 2, wh, { n })).status).toBe(202);
      await waitFor(() => at('/fifo').length >= N + 1, 60_000, 100);
      const order = at('/fifo').map((r) => JSON.parse(r.body.toString()).n);
      // Event 5 twice (failed, then retried), each other once, in ingest order.
      expect(order).toEqual([...Array.from({ length: 6 }, (_, i) => i), ...Array.from({ length: N - 5 }, (_, i) => i + 5)]);
    }, 90_000);

    it('keeps quotas exact across both processes: a 3/s rate limit and a monthly delivery limit', async () => {
      // A Free project: 3 requests a second, one budget for both processes.
      const free = JSON.parse((await runCli(serviceEnv(urls), ['project', 'create', '--name', 'small', '--tier', 'free'])).stdout);
      const freeHook = (await (await fetch(`${apis[0].url}/v1/webhooks`, { method: 'POST', headers: { authorization: `Bearer ${free.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'h', url: `${receiver.url}/quota` }) })).json()) as { publicId: string; ingestSecret: string };
      for (let attempt = 0; ; attempt++) {
        await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
        const second = Math.floor(Date.now() / 1000);
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => ingest(i % 2, freeHook, { i })));
        if (Math.floor(Date.now() / 1000) !== second) {
          expect(attempt, 'a burst of 10 never fit in one second').toBeLessThan(4);
          await new Promise((r) => setTimeout(r, 1100));
          continue;
        }
        expect(results.map((r) => r.status).sort()).toEqual([202, 202, 202, 429, 429, 429, 429, 429, 429, 429]);
        expect(results.filter((r) => r.status === 429).every((r) => r.body.error?.quota === 'ingest_rate')).toBe(true);
        break;
      }

      // An Enterprise project limited to 25 deliveries a month (set through the CLI): a burst of 60 across both processes lets exactly 25 in.
      const big = JSON.parse((await runCli(serviceEnv(urls), ['project', 'create', '--name', 'monthly', '--tier', 'enterprise'])).stdout);
      expect((await runCli(serviceEnv(urls), ['project', 'set-quota', big.project.id, 'monthly_deliveries', '25'])).code).toBe(0);
      const bigHook = (await (await fetch(`${apis[1].url}/v1/webhooks`, { method: 'POST', headers: { authorization: `Bearer ${big.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'h', url: `${receiver.url}/quota` }) })).json()) as { publicId: string; ingestSecret: string };
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => ingest(i % 2, bigHook, { i })));
      expect(results.filter((r) => r.status === 202)).toHaveLength(25);
      expect(results.filter((r) => r.status === 429 && r.body.error?.quota === 'monthly_deliveries')).toHaveLength(35);
    }, 60_000);

    it('met nothing a pooler breaks', () => {
      for (const p of [...apis.map((a) => a.proc), ...workers]) expectNoPoolerErrors(p);
      expect(bouncer.output()).not.toMatch(/unsupported startup parameter/);
    });
  });

  describe('npm start and the CLI', () => {
    it('start on an empty database through PgBouncer, create the default project, and deliver', async () => {
      const urls = await database();
      const port = await freePort();
      const main = started(startProcess('main', serviceEnv(urls, { PORT: String(port), SMTP_PORT: String(await freePort()) })));
      await waitStatus(port, '/readyz', 200, 90_000, main);
      await waitFor(() => printedKey(main), 10_000);
      const key = printedKey(main)!;
      const receiver = await startReceiver();
      try {
        const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
        const project = await (await fetch(`http://127.0.0.1:${port}/v1/project`, { headers })).json();
        expect(project.name).toBe('default');
        const wh = await (await fetch(`http://127.0.0.1:${port}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ name: 'h', url: receiver.url }) })).json();
        const res = await fetch(`http://127.0.0.1:${port}/i/${wh.publicId}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${wh.ingestSecret}` }, body: '{"hello":"npm start"}' });
        expect(res.status).toBe(202);
        await waitFor(() => receiver.received.length === 1, 20_000);

        // The CLI on the same two URLs, beside the running service.
        const tier = await runCli(serviceEnv(urls), ['project', 'set-tier', project.id, 'pro']);
        expect(tier.code, tier.output).toBe(0);
        expect(JSON.parse(tier.stdout).project.tier).toBe('pro');
        const keys = await runCli(serviceEnv(urls), ['api-key', 'list', project.id]);
        expect(JSON.parse(keys.stdout).items).toHaveLength(1);
        expectNoPoolerErrors(main);
      } finally {
        await receiver.close();
        expect(await stopProcess(main)).toBe(0);
      }
    }, 120_000);

    it('refuses DATABASE_DIRECT_URL without DATABASE_URL', async () => {
      const urls = await database();
      const p = started(startProcess('api', { DATABASE_DIRECT_URL: urls.direct, SECRETS_KEY, PORT: String(await freePort()) }, { unset: ['DATABASE_URL'] }));
      expect(await p.exited).toBe(1);
      expect(p.output()).toMatch(/DATABASE_DIRECT_URL is set without DATABASE_URL/);
    });
  });
});
