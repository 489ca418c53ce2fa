import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { mkdtempSync, readdirSync, rmSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota } from '../src/projects/service.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { retentionPass } from './support/passes.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let dataDir: string;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let starter: { projectId: string; apiKey: string };
let wh: Awaited<ReturnType<typeof createWebhook>>;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'form-ingest-'));
  app = await startTestApp({ worker: true, config: { DATA_DIR: dataDir, dataDir } as any });
  receiver = await startReceiver();
  starter = await app.project('starter');
  wh = await createWebhook(app, starter.apiKey, { url: receiver.url });
});
afterAll(async () => {
  await app?.stop();
  await receiver?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const db = () => app.rt.db.pool;
const formUrl = (publicId: string) => `${app.url}/f/${publicId}`;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const storedFiles = () => {
  const dir = path.join(dataDir, 'files');
  if (!existsSync(dir)) return [] as string[];
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
};
const fileBytes = async (projectId: string) =>
  Number((await db().query(`SELECT coalesce(sum(value), 0) AS v FROM usage_counters WHERE project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes'`, [projectId])).rows[0].v);
/** fileRef urls name PUBLIC_URL; the test server listens elsewhere. */
const local = (u: string) => app.url + new URL(u).pathname + new URL(u).search;

async function post(publicId: string, form: FormData | URLSearchParams, headers: Record<string, string> = {}) {
  const res = await fetch(formUrl(publicId), { method: 'POST', body: form, headers, redirect: 'manual' });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, headers: res.headers };
}

/** Sends a raw request, `chunks` one after the other (a function ends or breaks it), and collects the answer (or the socket's end). */
function rawPost(publicId: string, contentType: string, write: (req: http.ClientRequest) => Promise<void>): Promise<{ status: number | null; body: string }> {
  return new Promise((resolve) => {
    const req = http.request(formUrl(publicId), { method: 'POST', headers: { 'content-type': contentType, 'x-webhook-secret': wh.ingestSecret } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? null, body: Buffer.concat(chunks).toString() }));
      res.on('error', () => resolve({ status: res.statusCode ?? null, body: '' }));
    });
    req.on('error', () => resolve({ status: null, body: '' }));
    void write(req).catch(() => resolve({ status: null, body: '' }));
  });
}

describe('form ingest', () => {
  it('turns a multipart post into the form.submitted envelope, stores the file and delivers it signed (Starter)', async () => {
    const file = Buffer.from('%PDF-1.4 hello form');
    const form = new FormData();
    form.append('_secret', wh.ingestSecret);
    form.append('name', 'Ana');
    form.append('tags', 'a');
    form.append('tags', 'b');
    form.append('_other', 'dropped');
    form.append('cv', new Blob([file], { type: 'application/pdf' }), 'cv.pdf');
    const before = await fileBytes(starter.projectId);
    const res = await post(wh.publicId, form);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ eventId: expect.stringMatching(/^evt_/), deliveryId: expect.stringMatching(/^del_/), status: 'queued' });

    const got = (await waitFor(() => receiver.received.find((r) => r.headers['webhook-id'] === res.body.eventId), 15_000))!;
    expect(got.headers['content-type']).toMatch(/^application\/json/);
    const envelope = new Webhook(wh.signingSecret).verify(got.body.toString(), got.headers as Record<string, string>) as any;
    expect(envelope).toMatchObject({ type: 'form.submitted', webhookId: wh.id, fields: { name: 'Ana', tags: ['a', 'b'] } });
    expect(Date.parse(envelope.receivedAt)).toBeGreaterThan(Date.now() - 60_000);
    expect(envelope.files).toEqual([
      {
        field: 'cv',
        filename: 'cv.pdf',
        contentType: 'application/pdf',
        size: file.length,
        sha256: sha(file),
        fileRef: { id: expect.stringMatching(/^file_/), url: expect.stringContaining('/files/file_'), expiresAt: expect.any(String) },
      },
    ]);
    const ref = envelope.files[0].fileRef;
    expect(Date.parse(ref.expiresAt) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    expect(await fileBytes(starter.projectId)).toBe(before + file.length);

    // The signed link: bytes, content type, attachment; no API key.
    const link = await fetch(local(ref.url));
    expect(link.status).toBe(200);
    expect(link.headers.get('content-type')).toBe('application/pdf');
    expect(link.headers.get('content-disposition')).toContain('attachment; filename="cv.pdf"');
    expect(Buffer.from(await link.arrayBuffer()).equals(file)).toBe(true);

    // Tampered or expired links: 403 invalid_signature.
    const u = new URL(local(ref.url));
    const flipped = u.searchParams.get('sig')!.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    for (const bad of [
      `${u.pathname}?expires=${u.searchParams.get('expires')}&sig=${flipped}`,
      `${u.pathname}?expires=${Number(u.searchParams.get('expires')) + 1}&sig=${u.searchParams.get('sig')}`,
      `${u.pathname}?expires=${u.searchParams.get('expires')}`,
      `${u.pathname}`,
    ]) {
      const r = await fetch(app.url + bad);
      expect(r.status, bad).toBe(403);
      expect((await r.json()).error.code).toBe('invalid_signature');
    }
    const { fileRef } = await import('../src/files/service.ts');
    const expired = fileRef(app.rt.config, ref.id, Date.now() - 8 * 86_400_000);
    const old = await fetch(local(expired.url));
    expect(old.status).toBe(403);

    // With the API key: bytes and metadata; another project's key: 404.
    const bytes = await fetch(`${app.url}/v1/files/${ref.id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } });
    expect(bytes.status).toBe(200);
    expect(Buffer.from(await bytes.arrayBuffer()).equals(file)).toBe(true);
    const meta = await app.api(starter.apiKey, 'GET', `/v1/files/${ref.id}/metadata`);
    expect(meta.status).toBe(200);
    expect(meta.body).toEqual({
      id: ref.id,
      webhookId: wh.id,
      eventId: res.body.eventId,
      filename: 'cv.pdf',
      contentType: 'application/pdf',
      size: file.length,
      sha256: sha(file),
      createdAt: expect.any(String),
      expiresAt: expect.any(String),
    });
    const listed = await app.api(starter.apiKey, 'GET', `/v1/events/${res.body.eventId}/files`);
    expect(listed.body.map((f: any) => f.id)).toEqual([ref.id]);
    const other = await app.project('starter');
    expect((await fetch(`${app.url}/v1/files/${ref.id}`, { headers: { authorization: `Bearer ${other.apiKey}` } })).status).toBe(404);
    expect((await app.api(other.apiKey, 'GET', `/v1/files/${ref.id}/metadata`)).status).toBe(404);
    expect((await fetch(`${app.url}/v1/files/${ref.id}`)).status).toBe(401);
  });

  it('keeps metadata only on Free: no fileRef, no bytes stored, nothing counted', async () => {
    const free = await app.project('free');
    const fwh = await createWebhook(app, free.apiKey, { url: receiver.url });
    const before = storedFiles().length;
    const form = new FormData();
    form.append('note', 'hi');
    form.append('doc', new Blob([Buffer.from('free bytes')], { type: 'text/plain' }), 'a.txt');
    const res = await post(fwh.publicId, form, { 'x-webhook-secret': fwh.ingestSecret });
    expect(res.status).toBe(202);
    const { rows } = await db().query('SELECT body FROM events WHERE id = $1', [res.body.eventId]);
    const envelope = JSON.parse(rows[0].body.toString());
    expect(envelope.files).toEqual([{ field: 'doc', filename: 'a.txt', contentType: 'text/plain', size: 10, sha256: sha('free bytes') }]);
    expect(storedFiles().length).toBe(before);
    expect((await db().query('SELECT count(*)::int AS n FROM files WHERE event_id = $1', [res.body.eventId])).rows[0].n).toBe(0);
    expect(await fileBytes(free.projectId)).toBe(0);
  });

  it('takes urlencoded posts: _redirect answers 303, a javascript: redirect is 400, _honeypot stores nothing', async () => {
    const ok = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['email', 'a@x.test'], ['_redirect', 'https://example.com/thanks']]));
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('https://example.com/thanks');
    const plain = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['a', '1']]));
    expect(plain.status).toBe(202);
    const { rows } = await db().query('SELECT channel, content_type, body FROM events WHERE id = $1', [plain.body.eventId]);
    expect(rows[0]).toMatchObject({ channel: 'form', content_type: 'application/json' });
    expect(JSON.parse(rows[0].body.toString())).toMatchObject({ fields: { a: '1' }, files: [] });

    const js = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['_redirect', 'javascript:alert(1)']]));
    expect(js.status).toBe(400);
    expect(js.body.error).toMatchObject({ code: 'invalid_request', param: '_redirect' });

    const count = async () => Number((await db().query('SELECT count(*) AS n FROM events WHERE webhook_id = $1', [wh.id])).rows[0].n);
    const n = await count();
    const bot = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['_honeypot', 'spam'], ['x', 'y']]));
    expect(bot.status).toBe(202);
    expect(bot.body.eventId).toMatch(/^evt_/);
    expect(await count()).toBe(n);
  });

  it('takes a Standard Webhooks signature of the raw body instead of _secret, and routes on the envelope with channel "form"', async () => {
    const routed = await startReceiver();
    try {
      const hook = await createWebhook(app, starter.apiKey, { url: receiver.url });
      const dest = await app.api(starter.apiKey, 'POST', `/v1/webhooks/${hook.id}/destinations`, { name: 'forms', type: 'webhook', config: { url: routed.url } });
      expect(dest.status, JSON.stringify(dest.body)).toBe(201);
      const rules = await app.api(starter.apiKey, 'PUT', `/v1/webhooks/${hook.id}/routing`, {
        rules: [{ name: 'kind b', priority: 1, match: { channel: 'form', 'body.fields.kind': 'b' }, destinationId: dest.body.id }],
      });
      expect(rules.status, JSON.stringify(rules.body)).toBe(200);
      const body = 'kind=b&note=signed';
      const signed = new Webhook(hook.ingestSecret).sign('msg_form_1', new Date(), body);
      const res = await fetch(formUrl(hook.publicId), {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'webhook-id': 'msg_form_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': signed },
      });
      expect(res.status).toBe(202);
      const { deliveryId } = await res.json();
      const { rows } = await db().query('SELECT destination_id FROM deliveries WHERE id = $1', [deliveryId]);
      expect(rows[0].destination_id).toBe(dest.body.id);
      const bad = await fetch(formUrl(hook.publicId), {
        method: 'POST',
        body: 'kind=c',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'webhook-id': 'msg_form_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': signed },
      });
      expect(bad.status).toBe(401);
    } finally {
      await routed.close();
    }
  });

  it('answers as HTTP ingest does: 401, 404, 405, 409 paused, and 415 for other content types', async () => {
    expect((await post(wh.publicId, new URLSearchParams([['a', '1']]))).status).toBe(401);
    expect((await post(wh.publicId, new URLSearchParams([['_secret', 'whsec_wrong']]))).status).toBe(401);
    const header = await post(wh.publicId, new URLSearchParams([['a', '1']]), { authorization: `Bearer ${wh.ingestSecret}` });
    expect(header.status).toBe(202);
    expect((await post('hook_0000000000000000000000', new URLSearchParams([['_secret', wh.ingestSecret]]))).status).toBe(404);
    expect((await fetch(formUrl(wh.publicId))).status).toBe(405);
    const json = await fetch(formUrl(wh.publicId), { method: 'POST', body: '{}', headers: { 'content-type': 'application/json', 'x-webhook-secret': wh.ingestSecret } });
    expect(json.status).toBe(415);
    expect((await json.json()).error.code).toBe('unsupported_media_type');

    const paused = await createWebhook(app, starter.apiKey, { url: receiver.url });
    await app.api(starter.apiKey, 'POST', `/v1/webhooks/${paused.id}/pause`);
    const p = await post(paused.publicId, new URLSearchParams([['_secret', paused.ingestSecret]]));
    expect(p.status).toBe(409);
    expect(p.body.error.code).toBe('webhook_paused');
  });

  it('refuses a file over 15 MB and posts over 50 MB with 413 while streaming, storing nothing', async () => {
    const before = { files: storedFiles().length, bytes: await fileBytes(starter.projectId) };
    const big = new FormData();
    big.append('_secret', wh.ingestSecret);
    big.append('f', new Blob([Buffer.alloc(15 * 1024 * 1024 + 1, 1)]), 'big.bin');
    const one = await post(wh.publicId, big);
    expect(one.status).toBe(413);
    expect(one.body.error.code).toBe('payload_too_large');

    const many = new FormData();
    many.append('_secret', wh.ingestSecret);
    for (let i = 0; i < 4; i++) many.append(`f${i}`, new Blob([Buffer.alloc(14 * 1024 * 1024, i)]), `part${i}.bin`);
    const all = await post(wh.publicId, many);
    expect(all.status).toBe(413);
    await waitFor(async () => storedFiles().length === before.files, 5_000);
    expect(await fileBytes(starter.projectId)).toBe(before.bytes);
  });

  it('refuses files over the file-storage quota with 409, storing nothing', async () => {
    const ent = await app.project('enterprise');
    await setProjectQuota(app.rt, ent.projectId, 'file_storage_bytes', '1000');
    const ewh = await createWebhook(app, ent.apiKey, { url: receiver.url });
    const before = storedFiles().length;
    const form = new FormData();
    form.append('_secret', ewh.ingestSecret);
    form.append('f', new Blob([Buffer.alloc(2000, 7)]), 'x.bin');
    const res = await post(ewh.publicId, form);
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'file_storage_bytes', limit: 1000, delta: 2000 });
    expect((await db().query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [ewh.id])).rows[0].n).toBe(0);
    await waitFor(async () => storedFiles().length === before, 5_000);
    // Within the quota: taken.
    const small = new FormData();
    small.append('_secret', ewh.ingestSecret);
    small.append('f', new Blob([Buffer.alloc(500, 7)]), 'x.bin');
    expect((await post(ewh.publicId, small)).status).toBe(202);
    expect(await fileBytes(ent.projectId)).toBe(500);
  });

  it('refuses bad input with a clear 4xx and stores nothing', async () => {
    const count = async () => Number((await db().query('SELECT count(*) AS n FROM events WHERE webhook_id = $1', [wh.id])).rows[0].n);
    const n = await count();
    const filesBefore = storedFiles().length;
    const auth = { 'x-webhook-secret': wh.ingestSecret };
    // A missing boundary.
    const noBoundary = await fetch(formUrl(wh.publicId), { method: 'POST', headers: { ...auth, 'content-type': 'multipart/form-data' }, body: 'x' });
    expect(noBoundary.status).toBe(400);
    // Truncated multipart (no closing boundary).
    const truncated = await fetch(formUrl(wh.publicId), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'multipart/form-data; boundary=XYZ' },
      body: '--XYZ\r\ncontent-disposition: form-data; name="f"; filename="a.txt"\r\ncontent-type: text/plain\r\n\r\nhalf a file',
    });
    expect(truncated.status).toBe(400);
    // 10,000 fields.
    const fields = new URLSearchParams();
    for (let i = 0; i < 10_000; i++) fields.append(`f${i}`, 'v');
    const tooMany = await post(wh.publicId, fields, auth);
    expect(tooMany.status).toBe(413);
    // A 1 MB field name.
    const longName = await post(wh.publicId, new URLSearchParams([['n'.repeat(1024 * 1024), 'v']]), auth);
    expect(longName.status).toBe(413);
    // A file that never ends: the connection closes mid-file.
    const cut = await rawPost(wh.publicId, 'multipart/form-data; boundary=XYZ', async (req) => {
      req.write('--XYZ\r\ncontent-disposition: form-data; name="f"; filename="a.bin"\r\n\r\n');
      req.write(Buffer.alloc(256 * 1024, 1));
      await new Promise((r) => setTimeout(r, 100));
      req.destroy();
    });
    expect(cut.status).toBeNull();
    await new Promise((r) => setTimeout(r, 200));
    expect(await count()).toBe(n);
    await waitFor(async () => storedFiles().length === filesBefore, 5_000);

    // Non-UTF-8 filenames are taken (invalid bytes replaced), never a 500.
    const latin1 = Buffer.concat([
      Buffer.from('--XYZ\r\ncontent-disposition: form-data; name="f"; filename="caf'),
      Buffer.from([0xe9, 0xff]),
      Buffer.from('.txt"\r\ncontent-type: text/plain\r\n\r\nbody\r\n--XYZ--\r\n'),
    ]);
    const odd = await fetch(formUrl(wh.publicId), { method: 'POST', headers: { ...auth, 'content-type': 'multipart/form-data; boundary=XYZ' }, body: latin1 });
    expect(odd.status).toBe(202);
    const { rows } = await db().query('SELECT filename FROM files WHERE event_id = $1', [(await odd.json()).eventId]);
    expect(rows[0].filename).toMatch(/^caf.*\.txt$/);
  });

  it('retention removes file content after payload retention: 410 payload_gone, usage down', async () => {
    const form = new FormData();
    form.append('_secret', wh.ingestSecret);
    form.append('f', new Blob([Buffer.from('soon gone')]), 'g.txt');
    const res = await post(wh.publicId, form);
    expect(res.status).toBe(202);
    const { rows } = await db().query('SELECT id FROM files WHERE event_id = $1', [res.body.eventId]);
    const id = rows[0].id;
    const before = await fileBytes(starter.projectId);
    const report = await retentionPass(app.rt, { now: new Date(Date.now() + 8 * 86_400_000) });
    expect(report.filesPurged).toBeGreaterThanOrEqual(1);
    const gone = await fetch(`${app.url}/v1/files/${id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } });
    expect(gone.status).toBe(410);
    expect((await gone.json()).error.code).toBe('payload_gone');
    expect(await fileBytes(starter.projectId)).toBeLessThanOrEqual(before - 9);
    expect((await app.api(starter.apiKey, 'GET', `/v1/files/${id}/metadata`)).status).toBe(200);
  });
});

describe('form ingest: review fixes', () => {
  const count = async () => Number((await db().query('SELECT count(*) AS n FROM events WHERE webhook_id = $1', [wh.id])).rows[0].n);

  it('refuses a _redirect with CR/LF, spaces or controls with 400 before storing, and sends only the normalized URL', async () => {
    const n = await count();
    for (const bad of ['https://example.com/a\r\nset-cookie: x=1', 'https://example.com/\na', 'https://exa mple.com/', 'https://example.com/\u0000', '\thttps://example.com/']) {
      const res = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['a', '1'], ['_redirect', bad]]));
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: '_redirect' });
    }
    expect(await count()).toBe(n);
    // Non-Latin-1 characters: the answer is the percent-encoded href, never a 500.
    const intl = await post(wh.publicId, new URLSearchParams([['_secret', wh.ingestSecret], ['a', '1'], ['_redirect', 'https://example.com/merci/€?q=ü']]));
    expect(intl.status).toBe(303);
    expect(intl.headers.get('location')).toBe('https://example.com/merci/%E2%82%AC?q=%C3%BC');
    expect(await count()).toBe(n + 1);
  });

  it('checks _redirect on the honeypot path too', async () => {
    const js = await post(wh.publicId, new URLSearchParams([['_honeypot', '1'], ['_redirect', 'javascript:alert(1)']]));
    expect(js.status).toBe(400);
    expect(js.headers.get('location')).toBeNull();
    const ok = await post(wh.publicId, new URLSearchParams([['_honeypot', '1'], ['_redirect', 'https://example.com/x y'.replace(' ', '')]]));
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('https://example.com/xy');
  });

  it('keeps field names such as constructor and toString as plain fields', async () => {
    const res = await post(
      wh.publicId,
      new URLSearchParams([['_secret', wh.ingestSecret], ['constructor', 'c'], ['toString', 't1'], ['toString', 't2'], ['__proto__', 'p'], ['hasOwnProperty', 'h']]),
    );
    expect(res.status).toBe(202);
    const { rows } = await db().query('SELECT body FROM events WHERE id = $1', [res.body.eventId]);
    const fields = JSON.parse(rows[0].body.toString()).fields;
    // `__proto__` starts with `_`: a control, never delivered.
    expect(Object.keys(fields).sort()).toEqual(['constructor', 'hasOwnProperty', 'toString']);
    expect(fields.constructor).toBe('c');
    expect(fields.toString).toEqual(['t1', 't2']);
    expect(fields.hasOwnProperty).toBe('h');
  });

  it('stops reading a refused signed, chunked upload: 413 with connection: close, then the connection is dropped', async () => {
    const boundary = 'XYZ';
    const chunk = Buffer.alloc(256 * 1024, 7);
    const limit = 120 * 1024 * 1024;
    const result = await new Promise<{ status: number | null; connection: string | undefined; written: number }>((resolve) => {
      let written = 0;
      let status: number | null = null;
      let connection: string | undefined;
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        req.destroy();
        resolve({ status, connection, written });
      };
      const req = http.request(formUrl(wh.publicId), {
        method: 'POST',
        headers: {
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'transfer-encoding': 'chunked',
          'webhook-id': 'msg_big',
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
          'webhook-signature': 'v1,AAAA',
        },
      });
      req.on('response', (res) => {
        status = res.statusCode ?? null;
        connection = res.headers.connection;
        res.resume();
      });
      req.on('error', finish);
      req.on('close', finish);
      req.socket?.on('close', finish);
      req.on('socket', (s) => s.on('close', finish));
      const timer = setTimeout(finish, 20_000);
      req.on('close', () => clearTimeout(timer));
      const pump = () => {
        while (!done && written < limit) {
          written += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        if (!done) req.end();
      };
      req.write(`--${boundary}\r\ncontent-disposition: form-data; name="f"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`);
      pump();
    });
    expect(result.status).toBe(413);
    expect(result.connection).toBe('close');
    // Dropped soon after the 15 MB file cap, not read to the end.
    expect(result.written).toBeLessThan(limit);
  });

  it('after refusing an upload part-way, ends its side of the connection (FIN) rather than resetting it under a client still holding unsent bytes', async () => {
    // A raw client: headers, then more than the 15 MB file cap in one go, and nothing more (it neither ends nor closes).
    const url = new URL(formUrl(wh.publicId));
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise((r) => socket.once('connect', r));
    let answer = '';
    socket.on('data', (c) => (answer += c.toString('latin1')));
    const ended = new Promise<string>((resolve) => {
      socket.once('end', () => resolve('end'));
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    });
    const boundary = 'XYZ';
    socket.write(
      `POST ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    const part = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="f"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`);
    const chunk = Buffer.alloc(1024 * 1024, 7);
    const frame = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
    socket.write(frame(part));
    for (let i = 0; i < 20; i++) socket.write(frame(chunk));
    // The server's side ends after its answer, the rest of the upload unread; closed at once, the
    // kernel would reset the connection (ECONNRESET here) and a client still writing could miss the 413.
    const how = await Promise.race([ended, new Promise<string>((r) => setTimeout(() => r('nothing within 10 s'), 10_000))]);
    expect(how).toBe('end');
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    socket.destroy();
  });

  it('serves odd filenames safely, and a stored 8-bit content type as application/octet-stream', async () => {
    const body = Buffer.concat([
      Buffer.from('--XYZ\r\ncontent-disposition: form-data; name="f"; filename="r\u00e9sum\u00e9 \\"q\\".txt"\r\ncontent-type: application/x-'),
      Buffer.from('€', 'utf8'),
      Buffer.from('\r\n\r\nhello\r\n--XYZ--\r\n'),
    ]);
    const res = await fetch(formUrl(wh.publicId), { method: 'POST', headers: { 'x-webhook-secret': wh.ingestSecret, 'content-type': 'multipart/form-data; boundary=XYZ' }, body });
    expect(res.status).toBe(202);
    const { eventId } = await res.json();
    const { rows } = await db().query('SELECT id, content_type, filename FROM files WHERE event_id = $1', [eventId]);
    // busboy names an unparsable part type text/plain; the email channel is where odd types come in.
    expect(rows[0].content_type).toMatch(/^[a-z]+\/[a-z.+-]+$/);
    const { rows: ev } = await db().query('SELECT body FROM events WHERE id = $1', [eventId]);
    const file = JSON.parse(ev[0].body.toString()).files[0];
    expect(file.contentType).toBe(rows[0].content_type);
    for (const get of [() => fetch(`${app.url}/v1/files/${rows[0].id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } }), () => fetch(local(file.fileRef.url))]) {
      const got = await get();
      expect(got.status).toBe(200);
      expect(got.headers.get('content-type')).toBe(rows[0].content_type);
      const cd = got.headers.get('content-disposition')!;
      expect(cd).toMatch(/^attachment; filename="[\x20-\x7e]*"; filename\*=UTF-8''/);
      expect(cd.split('filename="')[1].split('";')[0]).not.toMatch(/["\\]/);
      expect(decodeURIComponent(cd.split("UTF-8''")[1])).toBe(rows[0].filename);
      expect(await got.text()).toBe('hello');
    }
    // A row stored before the fix (an 8-bit content type): still served, never a 500.
    await db().query(`UPDATE files SET content_type = 'application/x-€' WHERE id = $1`, [rows[0].id]);
    const legacy = await fetch(`${app.url}/v1/files/${rows[0].id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } });
    expect(legacy.status).toBe(200);
    expect(legacy.headers.get('content-type')).toBe('application/octet-stream');
    expect(await legacy.text()).toBe('hello');
  });
});

describe('file retention follows the current payload retention', () => {
  it('a tightened quota override purges files already stored (usage down, 410 payload_gone)', async () => {
    const hook = await createWebhook(app, starter.apiKey, { url: receiver.url });
    const form = new FormData();
    form.append('_secret', hook.ingestSecret);
    form.append('f', new Blob([Buffer.from('retained until tightened')]), 't.txt');
    const res = await post(hook.publicId, form);
    expect(res.status).toBe(202);
    const { rows } = await db().query('SELECT id, storage_key FROM files WHERE event_id = $1', [res.body.eventId]);
    const before = await fileBytes(starter.projectId);
    const put = await app.api(starter.apiKey, 'PUT', `/v1/webhooks/${hook.id}/quota-overrides`, { payload_retention_seconds: 60 });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    // Two minutes on: past the tightened retention (60 s), far from the tier's (fixed in expires_at).
    const report = await retentionPass(app.rt, { now: new Date(Date.now() + 120_000) });
    expect(report.filesPurged).toBeGreaterThanOrEqual(1);
    const { rows: after } = await db().query('SELECT state FROM files WHERE id = $1', [rows[0].id]);
    expect(after[0].state).toBe('purged');
    expect(existsSync(path.join(dataDir, 'files', rows[0].storage_key))).toBe(false);
    expect(await fileBytes(starter.projectId)).toBe(before - 24);
    const gone = await fetch(`${app.url}/v1/files/${rows[0].id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } });
    expect(gone.status).toBe(410);
  });
});
