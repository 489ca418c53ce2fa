import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { config } from '../src/config.ts';
import { newId } from '../src/ids.ts';
import { ORPHAN_GRACE_MS, ORPHAN_SWEEP_TASK, sweepOrphanFiles } from '../src/files/orphans.ts';
import { closeFileStore, fileStore } from '../src/files/store.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { retentionPass } from './support/passes.ts';
import { createWebhook } from './support/webhooks.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const read = async (s: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};
/** A stream that sends `good` bytes, then fails. */
const failing = (good: Buffer) =>
  new Readable({
    read() {
      if (good.length) {
        this.push(good);
        good = Buffer.alloc(0);
      } else this.destroy(new Error('the client went away'));
    },
  });

describe('file store', () => {
  let s3: S3rver;
  let s3Dir: string;
  let endpoint: string;
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  beforeAll(async () => {
    s3Dir = mkdtempSync(path.join(os.tmpdir(), 'files-s3rver-'));
    s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: s3Dir, configureBuckets: [{ name: 'files' }] });
    endpoint = `http://127.0.0.1:${(await s3.run()).port}`;
  });
  afterAll(async () => {
    s3.httpServer.closeAllConnections();
    await s3.close();
    rmSync(s3Dir, { recursive: true, force: true });
  });
  const s3Config = () => ({
    ...config,
    FILES_S3_BUCKET: 'files',
    FILES_S3_ENDPOINT: endpoint,
    FILES_S3_REGION: 'us-east-1',
    FILES_S3_ACCESS_KEY_ID: credentials.accessKeyId,
    FILES_S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    FILES_S3_FORCE_PATH_STYLE: true,
    FILES_S3_PREFIX: 'relay/',
  });

  it('disk: writes while streaming, reads back, leaves nothing when the stream fails, deletes', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'files-disk-'));
    const cfg = { ...config, dataDir: dir };
    const store = fileStore(cfg);
    expect(store.kind).toBe('disk');
    const bytes = Buffer.alloc(3 * 1024 * 1024 + 7, 9);
    await store.put('prj_a/file_a', Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]), 'application/octet-stream');
    expect((await read((await store.get('prj_a/file_a'))!)).equals(bytes)).toBe(true);
    await expect(store.put('prj_a/file_b', failing(Buffer.alloc(100)), 'text/plain')).rejects.toThrow();
    expect(readdirSync(path.join(dir, 'files', 'prj_a')).sort()).toEqual(['file_a']);
    expect(await store.get('prj_a/file_b')).toBeNull();
    await store.delete(['prj_a/file_a', 'prj_a/missing']);
    expect(await store.get('prj_a/file_a')).toBeNull();
    await expect(store.put('../escape', Readable.from([]), 'x')).rejects.toThrow();
    closeFileStore(cfg);
    rmSync(dir, { recursive: true, force: true });
  });

  it('S3: multipart upload of a streamed body byte for byte, reads back, a failed stream leaves no object, deletes', async () => {
    const cfg = s3Config();
    const store = fileStore(cfg);
    expect(store.kind).toBe('s3');
    const bytes = Buffer.alloc(6 * 1024 * 1024 + 11, 3);
    await store.put('prj_a/file_big', Readable.from([bytes.subarray(0, 4096), bytes.subarray(4096)]), 'application/pdf');
    const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials });
    const direct = await client.send(new GetObjectCommand({ Bucket: 'files', Key: 'relay/prj_a/file_big' }));
    expect(direct.ContentType).toBe('application/pdf');
    expect(sha(Buffer.from(await direct.Body!.transformToByteArray()))).toBe(sha(bytes));
    expect(sha(await read((await store.get('prj_a/file_big'))!))).toBe(sha(bytes));
    await expect(store.put('prj_a/file_broken', failing(Buffer.alloc(1000)), 'text/plain')).rejects.toThrow();
    expect(await store.get('prj_a/file_broken')).toBeNull();
    await store.delete(['prj_a/file_big']);
    expect(await store.get('prj_a/file_big')).toBeNull();
    client.destroy();
    closeFileStore(cfg);
  });

  describe('form files on S3, end to end', () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp({ config: s3Config() });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('stores a form file in the bucket, serves it by signed link and API key, and retention removes it (410)', async () => {
      const { apiKey } = await app.project('starter');
      const wh = await createWebhook(app, apiKey);
      const file = Buffer.from('s3 stored content');
      const form = new FormData();
      form.append('_secret', wh.ingestSecret);
      form.append('doc', new Blob([file], { type: 'text/plain' }), 'doc.txt');
      const res = await fetch(`${app.url}/f/${wh.publicId}`, { method: 'POST', body: form });
      expect(res.status).toBe(202);
      const { eventId } = await res.json();
      const { rows } = await app.rt.db.pool.query('SELECT body FROM events WHERE id = $1', [eventId]);
      const ref = JSON.parse(rows[0].body.toString()).files[0].fileRef;
      const u = new URL(ref.url);
      const link = await fetch(app.url + u.pathname + u.search);
      expect(link.status).toBe(200);
      expect(Buffer.from(await link.arrayBuffer()).equals(file)).toBe(true);
      const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials });
      const { rows: f } = await app.rt.db.pool.query('SELECT storage_key FROM files WHERE id = $1', [ref.id]);
      const direct = await client.send(new GetObjectCommand({ Bucket: 'files', Key: `relay/${f[0].storage_key}` }));
      expect(Buffer.from(await direct.Body!.transformToByteArray()).equals(file)).toBe(true);
      client.destroy();

      await retentionPass(app.rt, { now: new Date(Date.now() + 30 * 86_400_000) });
      const gone = await fetch(`${app.url}/v1/files/${ref.id}`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(gone.status).toBe(410);
      const link2 = await fetch(app.url + u.pathname + u.search);
      expect(link2.status).toBe(410);
      expect(existsSync(s3Dir)).toBe(true);
    });

    it('sweeps content that no file row names once it is past the grace period, keeping recorded files', async () => {
      const { apiKey, projectId } = await app.project('starter');
      const wh = await createWebhook(app, apiKey);
      const recorded = await postFile(app, wh, 'kept on s3');
      const store = fileStore(app.rt.config);
      // What a process that died before its event committed leaves behind.
      const orphan = `${projectId}/${newId('file')}`;
      await store.put(orphan, Buffer.from('never recorded'), 'text/plain');
      expect(await sweepOrphanFiles(app.rt)).toMatchObject({ removed: 0, complete: true });
      const body = await store.get(orphan);
      expect(body).not.toBeNull();
      body?.destroy();
      const later = await sweepOrphanFiles(app.rt, { now: new Date(Date.now() + ORPHAN_GRACE_MS + 60_000) });
      expect(later.removed).toBeGreaterThanOrEqual(1);
      expect(later.complete).toBe(true);
      expect(await store.get(orphan)).toBeNull();
      const bytes = await fetch(`${app.url}/v1/files/${recorded}`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(bytes.status).toBe(200);
      expect(await bytes.text()).toBe('kept on s3');
    });
  });
});

/** Posts one file by form ingest; returns its file id. */
async function postFile(app: TestApp, wh: { publicId: string; ingestSecret: string }, content: string): Promise<string> {
  const form = new FormData();
  form.append('_secret', wh.ingestSecret);
  form.append('doc', new Blob([content], { type: 'text/plain' }), 'doc.txt');
  const res = await fetch(`${app.url}/f/${wh.publicId}`, { method: 'POST', body: form });
  expect(res.status).toBe(202);
  const { eventId } = await res.json();
  const { rows } = await app.rt.db.pool.query('SELECT id FROM files WHERE event_id = $1', [eventId]);
  return rows[0].id;
}

describe('orphan file sweep on disk, as a graphile-worker job', () => {
  let app: TestApp;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'files-orphans-'));
    app = await startTestApp({ worker: true, config: { DATA_DIR: dir, dataDir: dir } as any });
  });
  afterAll(async () => {
    await app?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('removes content without a row (or with a purged one) older than the grace period; recent content and recorded files stay', async () => {
    const { apiKey, projectId } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const recorded = await postFile(app, wh, 'kept on disk');
    const purged = await postFile(app, wh, 'purged, but its removal failed');
    await app.rt.db.pool.query(`UPDATE files SET state = 'purged', purged_at = now() WHERE id = $1`, [purged]);
    const store = fileStore(app.rt.config);
    const crashed = `${projectId}/${newId('file')}`;
    const writing = `${projectId}/${newId('file')}`;
    const foreign = `${newId('prj')}/${newId('file')}`;
    // Not a key the file store makes: never touched, however old.
    const unrelated = `${projectId}/notes_of_someone_else`;
    for (const k of [crashed, writing, foreign, unrelated]) await store.put(k, Buffer.from(k), 'text/plain');
    // Everything but the upload still being written was last written two hours ago.
    const old = (Date.now() - 2 * ORPHAN_GRACE_MS) / 1000;
    for (const k of [crashed, foreign, unrelated, `${projectId}/${recorded}`, `${projectId}/${purged}`]) utimesSync(path.join(dir, 'files', k), old, old);

    // Whether content is there (the stream is closed again at once).
    const present = async (k: string) => {
      const body = await store.get(k);
      body?.destroy();
      return body !== null;
    };
    await app.rt.workerUtils.addJob(ORPHAN_SWEEP_TASK, {});
    await waitFor(async () => !(await present(crashed)) || null, 15_000);
    expect(await present(foreign)).toBe(false);
    expect(await present(`${projectId}/${purged}`)).toBe(false);
    expect(await present(writing)).toBe(true);
    expect(await present(unrelated)).toBe(true);
    const bytes = await fetch(`${app.url}/v1/files/${recorded}`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(bytes.status).toBe(200);
    expect(await bytes.text()).toBe('kept on disk');
    // Nothing left to do: a second sweep removes nothing.
    expect(await sweepOrphanFiles(app.rt)).toMatchObject({ removed: 0, complete: true });
  });
});
