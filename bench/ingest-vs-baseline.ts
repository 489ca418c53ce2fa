// HTTP ingest throughput against a bare node:http + pg server doing the same work in one
// transaction (insert the event, insert the delivery and its graphile-worker job).
//   npx tsx bench/ingest-vs-baseline.ts [seconds=10] [connections=50] [rounds=2] [async-commit]
// Uses DATABASE_URL when set, else an embedded PostgreSQL in a temporary directory.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { startApp } from '../src/app.ts';
import { config } from '../src/config.ts';
import { connectDatabase, inTransaction } from '../src/db/client.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { insertDelivery } from '../src/deliveries/enqueue.ts';
import { newId } from '../src/ids.ts';
import { createProject } from '../src/projects/service.ts';
import { createWebhook } from '../src/webhooks/create-webhook.ts';

const [seconds = 10, connections = 50, rounds = 2] = process.argv.slice(2, 5).map(Number);
// `async-commit` as 4th argument: no fsync wait per commit, so CPU cost per request shows.
const asyncCommit = process.argv[5] === 'async-commit';
const body = JSON.stringify({ type: 'order.created', data: { id: 'ord_1', items: Array.from({ length: 10 }, (_, i) => ({ sku: `sku-${i}`, qty: i, price: 9.99 })) } });

async function main() {
  let dir: string | undefined;
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  let url = config.DATABASE_URL;
  if (!url) {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bench-pg-'));
    await chmod(dir, 0o755); // the postgres user (when running as root) must reach it
    embedded = await startEmbeddedPostgres(path.join(dir, 'data'));
    url = embedded.url;
  }
  await migrate(url);
  if (asyncCommit) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`ALTER DATABASE "${new URL(url).pathname.slice(1) || 'postgres'}" SET synchronous_commit = off`);
    await admin.end();
  }

  const app = await startApp({ config: { ...config, HOST: '127.0.0.1', LOG_LEVEL: 'silent' }, databaseUrl: url, worker: false, port: 0 });
  const { project } = await createProject(app.rt, { name: 'bench', tier: 'pro' });
  const wh = await createWebhook(app.rt, project.id, { name: 'bench', url: 'https://example.com/hook' });
  const destination = await app.rt.db.prisma.destination.findFirstOrThrow({ where: { webhookId: wh.id, isDefault: true } });

  // The baseline: no auth, no lookup, no routing; the same inserts in one transaction.
  const base = connectDatabase(url, config.DATABASE_POOL_SIZE);
  const baseline = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const eventId = newId('evt');
    const delivery = await inTransaction(base.pool, async (client: pg.PoolClient) => {
      await client.query(
        `INSERT INTO events (id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size)
         VALUES ($1, $2, $3, 'http', $4, '/', '{}', $5, $6, $7, $8)`,
        [eventId, project.id, wh.id, req.method, JSON.stringify(req.headers), req.headers['content-type'] ?? null, raw, raw.length],
      );
      return insertDelivery(client, { projectId: project.id, webhookId: wh.id, eventId, destinationId: destination.id, destination });
    });
    const out = JSON.stringify({ eventId, deliveryId: delivery.id, status: delivery.status });
    res.writeHead(202, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
    res.end(out);
  });
  await new Promise<void>((r) => baseline.listen(0, '127.0.0.1', r));
  const baselineUrl = `http://127.0.0.1:${(baseline.address() as AddressInfo).port}/`;
  const ingestUrl = `${app.http!.url}/i/${wh.publicId}`;

  const run = async (target: string) => {
    const result = await autocannon({
      url: target,
      method: 'POST',
      connections,
      duration: seconds,
      headers: { 'content-type': 'application/json', 'x-webhook-secret': wh.ingestSecret },
      body,
    });
    const non2xx = result.non2xx + result.errors;
    return { rps: result.requests.average, p99: result.latency.p99, non2xx };
  };

  await run(baselineUrl); // warm-up both
  await run(ingestUrl);
  const results: { baseline: number; ingest: number }[] = [];
  for (let i = 0; i < rounds; i++) {
    const b = await run(baselineUrl);
    const s = await run(ingestUrl);
    console.log(`round ${i + 1}: baseline ${b.rps.toFixed(0)} req/s (p99 ${b.p99} ms, errors ${b.non2xx}); ingest ${s.rps.toFixed(0)} req/s (p99 ${s.p99} ms, errors ${s.non2xx}); ratio ${((s.rps / b.rps) * 100).toFixed(1)}%`);
    results.push({ baseline: b.rps, ingest: s.rps });
  }
  const sum = (k: 'baseline' | 'ingest') => results.reduce((a, r) => a + r[k], 0);
  console.log(`overall: ingest at ${((sum('ingest') / sum('baseline')) * 100).toFixed(1)}% of the baseline`);

  baseline.close();
  await base.close();
  await app.stop();
  await embedded?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
