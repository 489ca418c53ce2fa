// Where a burst of deliveries through a webhook with a trivial Automation spends its statements:
// the service (API + one runner) in this process on a fresh embedded database, a burst of
// events to a plain webhook and one to an Automation webhook, and per burst the deliveries/s and
// the statements sent per delivery, by name (pg.Pool.prototype.query counted).
//   npx tsx bench/automation-burst-profile.ts [events]      (add --cpu-prof to node for a CPU profile:
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/automation-burst-profile.ts)
import pg from 'pg';
import { startApp } from '../src/app.ts';
import { config } from '../src/config.ts';
import { createProject, setProjectQuota } from '../src/projects/service.ts';
import { provisionDatabase } from './database.ts';
import { kilobyteEvent, post } from './load/http-post.ts';
import { startTimingReceiver } from './load/receiver.ts';
import { createWorkDir } from './workdir.ts';

/** The bench's trivial transform (bench/load/automation-e2e-process.ts). */
const TRIVIAL = 'export default (event) => ({ type: event.body.type, id: event.body.id, note: event.body.data.note })';
const EVENTS = Number(process.argv[2] ?? 2000);
const log = (m: string) => process.stderr.write(`[profile] ${m}\n`);

const counts = new Map<string, number>();
const original = pg.Pool.prototype.query;
pg.Pool.prototype.query = function (this: pg.Pool, q: unknown, ...rest: unknown[]) {
  const named = q && typeof q === 'object' ? (q as { name?: string }).name : undefined;
  const name = named ?? (typeof q === 'string' ? q.replace(/\s+/g, ' ').slice(0, 60) : 'other');
  counts.set(name, (counts.get(name) ?? 0) + 1);
  return (original as (...a: unknown[]) => unknown).call(this, q, ...rest);
} as typeof original;

const workDir = await createWorkDir(log);
const database = await provisionDatabase(undefined, workDir, log);
const app = await startApp({ config: { ...config, HOST: '127.0.0.1', ALLOW_PRIVATE_DESTINATIONS: true, LOG_LEVEL: 'warn' } as typeof config, databaseUrl: database.url, worker: true, port: 0, smtpPort: 0 });
const receiver = await startTimingReceiver();
try {
  const { project, secret } = await createProject(app.rt, { name: 'profile', tier: 'enterprise' });
  // As the bench does: the Enterprise ingest limits lifted far above what the machine can do.
  for (const quota of ['ingest_rate', 'backlog_depth', 'stored_payload_bytes', 'monthly_deliveries']) await setProjectQuota(app.rt, project.id, quota, '1000000000000');
  const url = app.http!.url;
  const call = async (path: string, body: unknown, method = 'POST') => {
    const r = await fetch(url + path, { method, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  };
  const automation = await call('/v1/automations', { name: 'trivial', code: TRIVIAL });
  const hooks = {
    plain: await call('/v1/webhooks', { name: 'plain', url: `${receiver.url}/plain`, maxInFlight: 100 }),
    automation: await call('/v1/webhooks', { name: 'automation', url: `${receiver.url}/automation`, maxInFlight: 100 }),
  };
  await call(`/v1/webhooks/${hooks.automation.id}/transform`, { kind: 'automation', automationId: automation.id }, 'PUT');
  let seq = 0;
  async function burst(wh: { publicId: string; ingestSecret: string }, n: number) {
    const before = receiver.firstSeen.size;
    const start = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next++ < n) {
          const r = await post(`${url}/i/${wh.publicId}`, { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' }, kilobyteEvent(seq++));
          if (r.status !== 202) throw new Error(`ingest ${r.status} ${r.body}`);
        }
      }),
    );
    await receiver.waitFor(before + n, 300_000);
    return n / ((performance.now() - start) / 1000);
  }
  async function steady(wh: { publicId: string; ingestSecret: string }, rate: number, seconds: number) {
    const sent: { t0: number; id: string }[] = [];
    const pending: Promise<void>[] = [];
    const start = performance.now();
    for (let i = 0; i < rate * seconds; i++) {
      const wait = start + (i * 1000) / rate - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const t0 = performance.timeOrigin + performance.now();
      pending.push(
        post(`${url}/i/${wh.publicId}`, { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' }, kilobyteEvent(seq++)).then((r) => {
          sent.push({ t0, id: JSON.parse(r.body).eventId });
        }),
      );
    }
    await Promise.all(pending);
    const deadline = Date.now() + 60_000;
    while (sent.some((x) => !receiver.firstSeen.has(x.id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const lat = sent.map((x) => receiver.firstSeen.get(x.id)! - x.t0).sort((a, b) => a - b);
    return { p50: lat[Math.floor(lat.length / 2)], p90: lat[Math.floor(lat.length * 0.9)] };
  }
  await burst(hooks.plain, 200);
  await burst(hooks.automation, 200);
  if (process.env.STEADY) {
    for (let round = 0; round < 3; round++) {
      // As the bench's rounds go: a steady phase right after a plain burst (STEADY=after-burst).
      if (process.env.STEADY === 'after-burst') log(`plain burst: ${(await burst(hooks.plain, EVENTS)).toFixed(0)} deliveries/s`);
      for (const side of (process.env.STEADY === 'after-burst' ? ['automation', 'plain'] : ['plain', 'automation']) as ('plain' | 'automation')[]) {
        counts.clear();
        const s = await steady(hooks[side], 100, 4);
        const statements = [...counts].filter(([n]) => /automation|defer|claim|record/.test(n)).map(([n, c]) => `${n} ${c}`).join(', ');
        log(`steady 100/s ${side}: p50 ${s.p50.toFixed(1)} ms, p90 ${s.p90.toFixed(1)} ms; ${statements}`);
        await new Promise((r) => setTimeout(r, 1000));
        const held = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM automation_leases');
        log(`  leases held 1 s later: ${held.rows[0].n}`);
      }
    }
  }
  for (const side of ['plain', 'automation'] as const) {
    counts.clear();
    const perSec = await burst(hooks[side], EVENTS);
    await new Promise((r) => setTimeout(r, 500));
    const rows = [...counts].sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((s, [, n]) => s + n, 0);
    log(`${side}: ${EVENTS} events, ${perSec.toFixed(0)} deliveries/s (ingest included), ${total} statements, ${(total / EVENTS).toFixed(2)} per delivery`);
    for (const [name, n] of rows.slice(0, 25)) log(`  ${(n / EVENTS).toFixed(3).padStart(7)}  ${String(n).padStart(6)}  ${name}`);
  }
} finally {
  await receiver.close();
  await app.stop();
  await database.dispose();
  await workDir.remove();
}
process.exit(0);
