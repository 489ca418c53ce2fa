import { capturedStatements } from './support/statements.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingestingProject } from './support/webhooks.ts';

// Form and email ingest, as HTTP ingest: an accepted event with its files is one durable
// statement, and the runners are woken once it has committed, in whatever process they run.
let api: TestApp;
let runner: TestApp;
let dataDir: string;
beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'ingest-channels-'));
  const config = { ALLOW_PRIVATE_DESTINATIONS: true, DATA_DIR: dataDir, dataDir } as any;
  api = await startTestApp({ config });
  // A job runner of its own, polling once a minute: only a wake-up makes it attempt a delivery at once.
  runner = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ...config, WORKER_POLL_INTERVAL_MS: 60_000 } });
});
afterAll(async () => {
  await runner?.stop();
  await api?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const FILE = Buffer.alloc(10 * 1024, 'f');

function formWithFile(secret: string, i: number): FormData {
  const form = new FormData();
  form.append('_secret', secret);
  form.append('i', String(i));
  form.append('cv', new Blob([FILE], { type: 'text/plain' }), 'cv.txt');
  return form;
}

const transport = () => nodemailer.createTransport({ host: '127.0.0.1', port: api.smtp!.port, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000 } as any);
const mail = (to: string, i: number) => ({ from: 'a@x.test', to, subject: `mail ${i}`, text: String(i), attachments: [{ filename: 'a.bin', content: FILE }] });

/**
 * What `fn` makes this process send to PostgreSQL about ingest and files (statement names, or
 * the first words of unnamed ones), on any pool or connection.
 */
async function statementsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const sent = await capturedStatements(pg.Client.prototype, fn);
  return sent.filter((s) => /ingest|file|quota|^BEGIN|^COMMIT|^INSERT INTO files/i.test(s));
}

describe('form and email ingest: one statement per accepted event', () => {
  it('stores a form post and its file (rows and file_storage_bytes) in the event statement, without a statement of their own', async () => {
    const { apiKey, projectId } = await ingestingProject(api);
    const wh = await createWebhook(api, apiKey, { defaultDelaySeconds: 3600 });
    for (let i = 0; i < 3; i++) {
      const sent = await statementsOf(async () => {
        const res = await fetch(`${api.url}/f/${wh.publicId}`, { method: 'POST', body: formWithFile(wh.ingestSecret, i) });
        expect(res.status, await res.clone().text()).toBe(202);
      });
      // Near a limit, or without a recent reading of the usage, the quota lock comes first (a
      // transaction); right after a reading far from the limits, the bytes are counted without
      // reading the usage again (files_count). Never a separate file statement.
      const stored = sent.filter((s) => s.startsWith('ingest_insert_event'));
      expect(stored).toHaveLength(1);
      expect(stored[0]).toMatch(/^ingest_insert_event_and_delivery_within_(quotas|rate)_files_(checked|count)$/);
      expect(sent.filter((s) => /^file_storage_(usage|add)$|^INSERT INTO files/.test(s))).toEqual([]);
    }
    const { rows } = await api.rt.db.pool.query(
      `SELECT (SELECT count(*)::int FROM files WHERE webhook_id = $2) AS files,
              (SELECT coalesce(sum(value), 0)::bigint FROM usage_counters WHERE project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes') AS project_bytes,
              (SELECT coalesce(sum(value), 0)::bigint FROM usage_counters WHERE project_id = $1 AND webhook_id = $2 AND metric = 'file_storage_bytes') AS webhook_bytes`,
      [projectId, wh.id],
    );
    expect(rows[0]).toEqual({ files: 3, project_bytes: 3 * FILE.length, webhook_bytes: 3 * FILE.length });
  });

  it('stores a mail and its attachment in one statement once this process has a recent reading of the file storage in use', async () => {
    const { apiKey, projectId } = await ingestingProject(api);
    const wh = await createWebhook(api, apiKey, { defaultDelaySeconds: 3600 });
    const t = transport();
    const perMail: string[][] = [];
    try {
      for (let i = 0; i < 5; i++) perMail.push(await statementsOf(async () => expect((await t.sendMail(mail(wh.emailIngestAddress as string, i))).response).toMatch(/^250 /)));
    } finally {
      t.close();
    }
    // The first mail reads the usage in a transaction (the room its attachments have); a mail
    // right after it, far from the limits, is the event statement alone (a later one may read
    // again when more than 250 ms passed, under load).
    const alone = perMail.slice(1).filter((s) => s.length === 1 && /^ingest_insert_event_and_delivery_within_(quotas|rate)_files_(checked|count)$/.test(s[0]));
    expect(alone.length, JSON.stringify(perMail)).toBeGreaterThan(0);
    const { rows } = await api.rt.db.pool.query(
      `SELECT (SELECT count(*)::int FROM files WHERE webhook_id = $2) AS files, (SELECT count(*)::int FROM events WHERE webhook_id = $2) AS events,
              (SELECT coalesce(sum(value), 0)::bigint FROM usage_counters WHERE project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes') AS project_bytes`,
      [projectId, wh.id],
    );
    expect(rows[0]).toEqual({ files: 5, events: 5, project_bytes: 5 * FILE.length });
  });
});

describe('waking job runners after form and email ingest', () => {
  it('delivers form posts and mails ingested by another process long before the runner’s next poll (it polls once a minute): ingest wakes it', async () => {
    const receiver = await startReceiver();
    const t = transport();
    try {
      const { apiKey } = await ingestingProject(api);
      const wh = await createWebhook(api, apiKey, { url: `${receiver.url}/hook` });
      // Let the runner's first poll (at start) pass: what follows can only be found through a wake-up.
      await new Promise((r) => setTimeout(r, 300));
      const sends = [
        async (i: number) => {
          const res = await fetch(`${api.url}/f/${wh.publicId}`, { method: 'POST', body: formWithFile(wh.ingestSecret, i) });
          expect(res.status).toBe(202);
        },
        async (i: number) => expect((await t.sendMail(mail(wh.emailIngestAddress as string, i))).response).toMatch(/^250 /),
      ];
      for (let i = 0; i < 6; i++) {
        await sends[i % 2](i);
        // Within 20 s, a third of the poll interval: only a wake-up after the commit can have found it.
        await waitFor(() => receiver.received.length > i || null, 20_000).catch(() => {});
        expect(receiver.received, `event ${i} delivered before the runner's next poll`).toHaveLength(i + 1);
      }
      const types = receiver.received.map((r) => JSON.parse(r.body.toString()).type);
      expect(types).toEqual(['form.submitted', 'email.received', 'form.submitted', 'email.received', 'form.submitted', 'email.received']);
    } finally {
      t.close();
      await receiver.close();
    }
  });
});
