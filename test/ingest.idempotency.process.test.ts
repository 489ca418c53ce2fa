// Idempotency keys hold exactly across API processes and restarts (CONTRACT §12): two real
// `start:api` processes on one database take 50 pairs of requests at once, each pair one key sent
// to both; then one process restarts and every key is still remembered.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectDatabase } from '../src/db/client.ts';
import { freePort } from '../src/db/embedded.ts';
import { createProject, setProjectQuota } from '../src/projects/service.ts';
import { createTestDatabase } from './support/database.ts';
import { startProcess, stopProcess, waitStatus, type ServiceProcess } from './support/processes.ts';

const DEPLOYMENT = { SECRETS_KEY: randomBytes(32).toString('base64') };
const PAIRS = 50;
const started: ServiceProcess[] = [];
let dataRoot: string;
let databaseUrl: string;

async function api(databaseUrl: string): Promise<{ port: number; proc: ServiceProcess }> {
  const port = await freePort();
  const proc = startProcess('api', { ...DEPLOYMENT, DATABASE_URL: databaseUrl, DATA_DIR: path.join(dataRoot, String(started.length)), PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` });
  started.push(proc);
  await waitStatus(port, '/readyz', 200, 60_000, proc);
  return { port, proc };
}

beforeAll(async () => {
  dataRoot = await mkdtemp(path.join(os.tmpdir(), 'idem-process-'));
  databaseUrl = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(started.map((p) => stopProcess(p)));
  await rm(dataRoot, { recursive: true, force: true });
});

it('50 concurrent pairs of one key on two start:api processes make 50 events; a restarted process still knows every key', async () => {
  const db = connectDatabase(databaseUrl, 2);
  try {
    const [a, b] = await Promise.all([api(databaseUrl), api(databaseUrl)]);
    const { secret, project } = await createProject({ db } as never, { name: 'idem', tier: 'enterprise' });
    await setProjectQuota({ db } as never, project.id, 'ingest_rate', '1000000');
    const created = await fetch(`http://127.0.0.1:${a.port}/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/hook' }),
    });
    expect(created.status).toBe(201);
    const wh = (await created.json()) as { id: string; publicId: string; ingestSecret: string };
    const send = async (port: number, key: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/i/${wh.publicId}`, {
        method: 'POST',
        headers: { 'x-webhook-secret': wh.ingestSecret, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ key }),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const keys = Array.from({ length: PAIRS }, (_, i) => `pair-${i}`);
    const pairs = await Promise.all(keys.map((k) => Promise.all([send(a.port, k), send(b.port, k)])));
    const first = new Map<string, string>();
    for (const [i, pair] of pairs.entries()) {
      const queued = pair.filter((r) => r.status === 202 && r.body.status === 'queued');
      expect(queued, JSON.stringify(pair)).toHaveLength(1);
      for (const r of pair) {
        if (r.status === 202) expect(r.body.eventId).toBe(queued[0].body.eventId);
        else expect(r.body.error.code).toBe('idempotency_key_in_progress');
      }
      first.set(keys[i], queued[0].body.eventId);
    }
    const { rows } = await db.pool.query<{ n: number; keys: number }>('SELECT count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys FROM deliveries WHERE webhook_id = $1', [wh.id]);
    expect(rows[0]).toEqual({ n: PAIRS, keys: PAIRS });

    // A restart forgets nothing: the keys live in the database.
    await stopProcess(b.proc);
    const c = await api(databaseUrl);
    const again = await Promise.all(keys.map((k, i) => send(i % 2 ? a.port : c.port, k)));
    for (const [i, r] of again.entries()) expect(r.body, keys[i]).toMatchObject({ eventId: first.get(keys[i]), status: 'duplicate' });
    const reused = await fetch(`http://127.0.0.1:${c.port}/i/${wh.publicId}`, {
      method: 'POST',
      headers: { 'x-webhook-secret': wh.ingestSecret, 'idempotency-key': 'pair-0', 'content-type': 'application/json' },
      body: '{"another":"body"}',
    });
    expect(reused.status).toBe(422);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [wh.id])).rows[0].n).toBe(PAIRS);
  } finally {
    await db.close();
  }
}, 180_000);
