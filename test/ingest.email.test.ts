import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota } from '../src/projects/service.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { retentionPass } from './support/passes.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let dataDir: string;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let starter: { projectId: string; apiKey: string };
let wh: Awaited<ReturnType<typeof createWebhook>>;
const DOMAIN = 'ingest.test';

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'email-ingest-'));
  app = await startTestApp({ worker: true, config: { DATA_DIR: dataDir, dataDir, SMTP_TIMEOUT_MS: 5000 } as any });
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
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const transport = (extra: Record<string, unknown> = {}) =>
  nodemailer.createTransport({ host: '127.0.0.1', port: app.smtp!.port, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000, ...extra } as any);
const events = async (webhookId: string) => (await db().query('SELECT id, channel, content_type, body FROM events WHERE webhook_id = $1 ORDER BY id', [webhookId])).rows;

/** A raw SMTP conversation: sends each line after the previous reply, returns every reply. */
async function converse(lines: string[], opts: { stallAfter?: number } = {}): Promise<string[]> {
  const socket = net.connect(app.smtp!.port, '127.0.0.1');
  const replies: string[] = [];
  let buffer = '';
  let waiting: ((line: string) => void) | null = null;
  socket.on('data', (d) => {
    buffer += d.toString();
    for (;;) {
      const m = /^(\d{3}) .*\r\n/m.exec(buffer);
      if (!m) break;
      const end = m.index + m[0].length;
      const reply = buffer.slice(0, end);
      buffer = buffer.slice(end);
      replies.push(reply.trim());
      const w = waiting;
      waiting = null;
      w?.(reply);
    }
  });
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  const next = () => new Promise<string>((r) => (waiting = r));
  await Promise.race([next(), closed]); // greeting
  for (let i = 0; i < lines.length; i++) {
    if (opts.stallAfter !== undefined && i === opts.stallAfter) {
      await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
      break;
    }
    const answered = next();
    socket.write(lines[i] + '\r\n');
    if (lines[i].endsWith('\r\n.') || !lines[i].includes('\r\n')) await Promise.race([answered, closed, new Promise((r) => setTimeout(r, 5_000))]);
  }
  socket.destroy();
  return replies;
}

describe('email ingest', () => {
  it('turns a mail into the email.received envelope, keeps the attachment (Starter) and delivers it signed; replay re-sends it', async () => {
    const attachment = Buffer.alloc(100 * 1024, 5);
    const info = await transport().sendMail({
      from: '"Ana" <ana@x.test>',
      to: `${wh.publicId.toUpperCase()}@${DOMAIN}`,
      cc: 'Bo <bo@y.test>',
      replyTo: 'reply@x.test',
      subject: 'Hello ✓',
      text: 'plain body',
      html: '<p>html body</p>',
      headers: { 'X-Custom': 'v' },
      attachments: [{ filename: 'data.bin', content: attachment, contentType: 'application/octet-stream' }],
    });
    expect(info.response).toMatch(/^250 /);
    expect(info.accepted).toHaveLength(1);

    const rows = await events(wh.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ channel: 'email', content_type: 'application/json' });
    const got = (await waitFor(() => receiver.received.find((r) => r.headers['webhook-id'] === rows[0].id), 15_000))!;
    const envelope = new Webhook(wh.signingSecret).verify(got.body.toString(), got.headers as Record<string, string>) as any;
    expect(envelope).toMatchObject({
      type: 'email.received',
      webhookId: wh.id,
      envelope: { mailFrom: 'ana@x.test', rcptTo: [`${wh.publicId.toUpperCase()}@${DOMAIN}`] },
      messageId: info.messageId,
      subject: 'Hello ✓',
      from: { address: 'ana@x.test', name: 'Ana' },
      to: [{ address: `${wh.publicId.toUpperCase()}@${DOMAIN}`, name: '' }],
      cc: [{ address: 'bo@y.test', name: 'Bo' }],
      replyTo: [{ address: 'reply@x.test', name: '' }],
      text: 'plain body',
      html: '<p>html body</p>',
    });
    expect(typeof envelope.date).toBe('string');
    expect(envelope.headers['x-custom']).toBe('v');
    expect(envelope.attachments).toEqual([
      {
        filename: 'data.bin',
        contentType: 'application/octet-stream',
        size: attachment.length,
        sha256: sha(attachment),
        contentId: null,
        disposition: 'attachment',
        fileRef: { id: expect.stringMatching(/^file_/), url: expect.any(String), expiresAt: expect.any(String) },
      },
    ]);
    const u = new URL(envelope.attachments[0].fileRef.url);
    const link = await fetch(app.url + u.pathname + u.search);
    expect(Buffer.from(await link.arrayBuffer()).equals(attachment)).toBe(true);

    // Replay of the email event: the same bytes, the same webhook-id.
    const { rows: d } = await db().query('SELECT id FROM deliveries WHERE event_id = $1', [rows[0].id]);
    await waitFor(async () => (await app.api(starter.apiKey, 'GET', `/v1/deliveries/${d[0].id}`)).body.status === 'succeeded', 15_000);
    const replay = await app.api(starter.apiKey, 'POST', `/v1/deliveries/${d[0].id}/replay`);
    expect(replay.status).toBe(202);
    const sent = () => receiver.received.filter((r) => r.headers['webhook-id'] === rows[0].id);
    await waitFor(() => sent().length >= 2, 15_000);
    expect(sent()[1].body.equals(sent()[0].body)).toBe(true);
  });

  it('keeps attachments as metadata only on Free', async () => {
    const free = await app.project('free');
    const fwh = await createWebhook(app, free.apiKey, { url: receiver.url });
    const info = await transport().sendMail({ from: 'a@x.test', to: `${fwh.publicId}@${DOMAIN}`, subject: 's', text: 't', attachments: [{ filename: 'a.txt', content: 'free' }] });
    expect(info.response).toMatch(/^250 /);
    const [row] = await events(fwh.id);
    const envelope = JSON.parse(row.body.toString());
    expect(envelope.attachments).toEqual([{ filename: 'a.txt', contentType: 'text/plain', size: 4, sha256: sha('free'), contentId: null, disposition: 'attachment' }]);
    expect((await db().query('SELECT count(*)::int AS n FROM files WHERE event_id = $1', [row.id])).rows[0].n).toBe(0);
  });

  it('keeps attachments over the file-storage quota or the file caps as metadata only, never refusing the mail', async () => {
    const ent = await app.project('enterprise');
    await setProjectQuota(app.rt, ent.projectId, 'file_storage_bytes', '1500');
    const ewh = await createWebhook(app, ent.apiKey, { url: receiver.url });
    const info = await transport().sendMail({
      from: 'a@x.test',
      to: `${ewh.publicId}@${DOMAIN}`,
      subject: 'quota',
      text: 't',
      attachments: [
        { filename: 'fits.bin', content: Buffer.alloc(1000, 1) },
        { filename: 'over-quota.bin', content: Buffer.alloc(1000, 2) },
        { filename: 'over-cap.bin', content: Buffer.alloc(15 * 1024 * 1024 + 1, 3) },
      ],
    });
    expect(info.response).toMatch(/^250 /);
    const [row] = await events(ewh.id);
    const envelope = JSON.parse(row.body.toString());
    expect(envelope.attachments.map((a: any) => [a.filename, a.size, 'fileRef' in a])).toEqual([
      ['fits.bin', 1000, true],
      ['over-quota.bin', 1000, false],
      ['over-cap.bin', 15 * 1024 * 1024 + 1, false],
    ]);
    expect(envelope.attachments[2].sha256).toBe(sha(Buffer.alloc(15 * 1024 * 1024 + 1, 3)));
    const usage = await db().query(`SELECT coalesce(sum(value), 0)::int AS v FROM usage_counters WHERE project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes'`, [ent.projectId]);
    expect(usage.rows[0].v).toBe(1000);
  });

  it('decides each RCPT on its own: 550 unknown, archived or foreign domain, 450 paused, 451/452 over quota; a mail to ten webhooks', async () => {
    const paused = await createWebhook(app, starter.apiKey, { url: receiver.url });
    await app.api(starter.apiKey, 'POST', `/v1/webhooks/${paused.id}/pause`);
    const archived = await createWebhook(app, starter.apiKey, { url: receiver.url });
    await app.api(starter.apiKey, 'POST', `/v1/webhooks/${archived.id}/archive`);
    const backlogged = await app.project('enterprise');
    await setProjectQuota(app.rt, backlogged.projectId, 'backlog_depth', '0');
    const bwh = await createWebhook(app, backlogged.apiKey, { url: receiver.url });
    const full = await app.project('enterprise');
    await setProjectQuota(app.rt, full.projectId, 'stored_payload_bytes', '0');
    const sfwh = await createWebhook(app, full.apiKey, { url: receiver.url });

    const replies = await converse([
      'EHLO client.test',
      'MAIL FROM:<a@x.test>',
      `RCPT TO:<hook_00000000000000000000@${DOMAIN}>`,
      `RCPT TO:<${wh.publicId}@other.test>`,
      `RCPT TO:<${archived.publicId}@${DOMAIN}>`,
      `RCPT TO:<${paused.publicId}@${DOMAIN}>`,
      `RCPT TO:<${bwh.publicId}@${DOMAIN}>`,
      `RCPT TO:<${sfwh.publicId}@${DOMAIN}>`,
      'QUIT',
    ]);
    expect(replies[1]).toMatch(/SIZE 62914560/);
    expect(replies.slice(3, 9).map((r) => r.slice(0, 3))).toEqual(['550', '550', '550', '450', '451', '452']);

    // Ten webhooks at once, one of them paused: the nine are stored, the paused one refused at RCPT.
    const hooks = await Promise.all(Array.from({ length: 9 }, () => createWebhook(app, starter.apiKey, { url: receiver.url })));
    const info = await transport().sendMail({ from: 'a@x.test', to: [...hooks.map((h) => `${h.publicId}@${DOMAIN}`), `${paused.publicId}@${DOMAIN}`], subject: 'ten', text: 'x' });
    expect(info.accepted).toHaveLength(9);
    expect(info.rejected).toEqual([`${paused.publicId}@${DOMAIN}`]);
    for (const h of hooks) {
      const [row] = await events(h.id);
      expect(JSON.parse(row.body.toString())).toMatchObject({ webhookId: h.id, envelope: { rcptTo: [`${h.publicId}@${DOMAIN}`] } });
    }
  });

  it('refuses a declared size over 60 MB with 552 and drops a client that stalls mid-DATA, storing nothing', async () => {
    const big = await converse(['EHLO client.test', 'MAIL FROM:<a@x.test> SIZE=70000000', 'QUIT']);
    expect(big[2]).toMatch(/^552 /);

    const n = (await events(wh.id)).length;
    const stalled = await converse(['EHLO client.test', 'MAIL FROM:<a@x.test>', `RCPT TO:<${wh.publicId}@${DOMAIN}>`, 'DATA', 'Subject: half\r\n\r\nhalf a message'], { stallAfter: 5 });
    expect(stalled[4]).toMatch(/^354/);
    await new Promise((r) => setTimeout(r, 200));
    expect((await events(wh.id)).length).toBe(n);
    // The server still takes mail.
    expect((await transport().sendMail({ from: 'a@x.test', to: `${wh.publicId}@${DOMAIN}`, subject: 'after', text: 'ok' })).response).toMatch(/^250 /);
  });

  it('takes odd mail without a 500 or a crash: broken MIME, 8-bit headers, 100-deep nesting, an attachment bomb', async () => {
    // An Enterprise project with the ingest rate out of the way (four mails in quick succession).
    const { apiKey } = await ingestingProject(app);
    const hook = await createWebhook(app, apiKey, { url: receiver.url });
    const to = `${hook.publicId}@${DOMAIN}`;
    const head = `From: a@x.test\r\nTo: ${to}\r\nSubject: odd\r\nMIME-Version: 1.0\r\n`;
    let nested = 'Content-Type: text/plain\r\n\r\ndeep\r\n';
    for (let i = 0; i < 100; i++) nested = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${nested}--b${i}--\r\n`;
    let bomb = `Content-Type: multipart/mixed; boundary="bb"\r\n\r\n`;
    for (let i = 0; i < 2000; i++) bomb += `--bb\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="p${i}.bin"\r\n\r\nx\r\n`;
    bomb += '--bb--\r\n';
    const raws = [
      `${head}Content-Type: multipart/mixed; boundary="zz"\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nno end boundary, and a part with no headers\r\n--zz\r\n`,
      Buffer.concat([Buffer.from(`From: a@x.test\r\nTo: ${to}\r\nSubject: caf`), Buffer.from([0xe9, 0xff]), Buffer.from('\r\nX-8bit: \xfe\r\n\r\nbody\r\n')]),
      `${head}${nested}`,
      `${head}${bomb}`,
    ];
    for (const raw of raws) {
      const info = await transport().sendMail({ envelope: { from: 'a@x.test', to: [to] }, raw });
      expect(info.response).toMatch(/^250 /);
    }
    const rows = await events(hook.id);
    expect(rows).toHaveLength(4);
    const bombEnvelope = JSON.parse(rows[3].body.toString());
    expect(bombEnvelope.attachments.length).toBe(1000);
    expect((await db().query('SELECT count(*)::int AS n FROM files WHERE event_id = $1', [rows[3].id])).rows[0].n).toBe(100);
  });

  it('offers STARTTLS when a certificate is configured', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'smtp-tls-'));
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'], { stdio: 'ignore' });
    const tlsApp = await startTestApp({ databaseUrl: app.databaseUrl, config: { SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key } });
    try {
      const t = nodemailer.createTransport({ host: '127.0.0.1', port: tlsApp.smtp!.port, secure: false, requireTLS: true, tls: { rejectUnauthorized: false } } as any);
      const info = await t.sendMail({ from: 'a@x.test', to: `${wh.publicId}@${DOMAIN}`, subject: 'tls', text: 'secure' });
      expect(info.response).toMatch(/^250 /);
      // Without a certificate, STARTTLS is not offered.
      const plain = await converse(['EHLO client.test', 'QUIT']);
      expect(plain[1]).not.toMatch(/STARTTLS/);
    } finally {
      await tlsApp.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A raw SMTP session: `send` writes a line (or DATA's content) and resolves with the next reply. */
async function session() {
  const socket = net.connect(app.smtp!.port, '127.0.0.1');
  let buffer = '';
  const queue: string[] = [];
  let waiting: ((line: string) => void) | null = null;
  socket.on('data', (d) => {
    buffer += d.toString();
    for (let m = /^(\d{3}) .*\r\n/m.exec(buffer); m; m = /^(\d{3}) .*\r\n/m.exec(buffer)) {
      const reply = buffer.slice(0, m.index + m[0].length).trim();
      buffer = buffer.slice(m.index + m[0].length);
      if (waiting) {
        const w = waiting;
        waiting = null;
        w(reply.split('\r\n').pop()!);
      } else queue.push(reply.split('\r\n').pop()!);
    }
  });
  socket.on('close', () => waiting?.('closed'));
  const next = () => (queue.length ? Promise.resolve(queue.shift()!) : new Promise<string>((r) => (waiting = r)));
  await next();
  return {
    send: (line: string) => {
      socket.write(line + '\r\n');
      return Promise.race([next(), new Promise<string>((r) => setTimeout(() => r('timeout'), 10_000))]);
    },
    close: () => socket.destroy(),
  };
}

describe('email ingest: review fixes', () => {
  const filesOf = (projectId: string) => {
    const dir = path.join(dataDir, 'files', projectId);
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  it('keeps header names such as constructor, toString and __proto__ as plain headers', async () => {
    const hook = await createWebhook(app, starter.apiKey, { url: receiver.url });
    const info = await transport().sendMail({
      from: 'a@x.test',
      to: `${hook.publicId}@${DOMAIN}`,
      subject: 'proto',
      text: 't',
      headers: [
        { key: 'constructor', value: 'c' },
        { key: 'toString', value: 't1' },
        { key: '__proto__', value: 'p' },
        { key: 'hasOwnProperty', value: 'h' },
      ],
    });
    expect(info.response).toMatch(/^250 /);
    const [row] = await events(hook.id);
    const headers = JSON.parse(row.body.toString()).headers;
    expect(Object.getOwnPropertyDescriptor(headers, 'constructor')?.value).toBe('c');
    expect(Object.getOwnPropertyDescriptor(headers, 'tostring')?.value).toBe('t1');
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toBe('p');
    expect(Object.getOwnPropertyDescriptor(headers, 'hasownproperty')?.value).toBe('h');
  });

  it('stores an 8-bit attachment content type as application/octet-stream, and serves it', async () => {
    const hook = await createWebhook(app, starter.apiKey, { url: receiver.url });
    const raw = [
      'From: a@x.test',
      `To: ${hook.publicId}@${DOMAIN}`,
      'Subject: odd type',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="B"',
      '',
      '--B',
      'Content-Type: text/plain',
      '',
      'body',
      '--B',
      'Content-Type: application/x-€; name="a.bin"',
      'Content-Disposition: attachment; filename="a.bin"',
      '',
      'content',
      '--B--',
      '',
    ].join('\r\n');
    const info = await transport().sendMail({ envelope: { from: 'a@x.test', to: [`${hook.publicId}@${DOMAIN}`] }, raw: Buffer.from(raw, 'utf8') });
    expect(info.response).toMatch(/^250 /);
    const [row] = await events(hook.id);
    const [att] = JSON.parse(row.body.toString()).attachments;
    expect(att.contentType).toBe('application/octet-stream');
    const got = await fetch(`${app.url}/v1/files/${att.fileRef.id}`, { headers: { authorization: `Bearer ${starter.apiKey}` } });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/octet-stream');
    expect((await got.text()).trim()).toBe('content');
  });

  it('leaves no orphan content when only some attachments fit the quota room', async () => {
    const ent = await app.project('enterprise');
    await setProjectQuota(app.rt, ent.projectId, 'file_storage_bytes', '1500');
    const hook = await createWebhook(app, ent.apiKey, { url: receiver.url });
    const info = await transport().sendMail({
      from: 'a@x.test',
      to: `${hook.publicId}@${DOMAIN}`,
      subject: 'room',
      text: 't',
      attachments: [
        { filename: 'fits.bin', content: Buffer.alloc(1000, 1) },
        { filename: 'no-room.bin', content: Buffer.alloc(1000, 2) },
        { filename: 'no-room-2.bin', content: Buffer.alloc(900, 2) },
      ],
    });
    expect(info.response).toMatch(/^250 /);
    const { rows } = await db().query('SELECT id FROM files WHERE webhook_id = $1', [hook.id]);
    expect(rows).toHaveLength(1);
    await waitFor(async () => filesOf(ent.projectId).length === 1, 5_000);
    expect(filesOf(ent.projectId)).toEqual([rows[0].id]);
  });

  it('answers 250 only when every recipient is stored: a recipient refused at DATA stores nothing for any', async () => {
    const a = await createWebhook(app, starter.apiKey, { url: receiver.url });
    const b = await createWebhook(app, starter.apiKey, { url: receiver.url });
    const s = await session();
    try {
      expect(await s.send('EHLO client.test')).toMatch(/^250 /);
      expect(await s.send('MAIL FROM:<a@x.test>')).toMatch(/^250 /);
      expect(await s.send(`RCPT TO:<${a.publicId}@${DOMAIN}>`)).toMatch(/^250 /);
      expect(await s.send(`RCPT TO:<${b.publicId}@${DOMAIN}>`)).toMatch(/^250 /);
      // b is paused between RCPT and DATA.
      expect((await app.api(starter.apiKey, 'POST', `/v1/webhooks/${b.id}/pause`)).status).toBe(200);
      expect(await s.send('DATA')).toMatch(/^354 /);
      const reply = await s.send('Subject: both\r\n\r\nhello\r\n.');
      expect(reply).toMatch(/^4\d\d /);
    } finally {
      s.close();
    }
    expect(await events(a.id)).toHaveLength(0);
    expect(await events(b.id)).toHaveLength(0);
  });

  it('answers a webhook that changed during the request with a temporary 451, bad input with 554', async () => {
    const { smtpRefusal } = await import('../src/ingest/email-ingest.ts');
    const { InvalidRequest, InvalidState, PayloadTooLarge } = await import('../src/errors.ts');
    expect(smtpRefusal(new InvalidState('the webhook kept changing')).responseCode).toBe(451);
    expect(smtpRefusal(new InvalidRequest('bad')).responseCode).toBe(554);
    expect(smtpRefusal(new PayloadTooLarge(10)).responseCode).toBe(552);
  });

  it('bounds the connections at once (maxClients): the one over is refused with 421', async () => {
    const { EMAIL_LIMITS } = await import('../src/ingest/email-ingest.ts');
    const sockets: net.Socket[] = [];
    try {
      const greeted = (s: net.Socket) => new Promise<string>((r) => { s.once('data', (d) => r(d.toString())); s.once('close', () => r('closed')); setTimeout(() => r('timeout'), 10_000); });
      for (let i = 0; i < EMAIL_LIMITS.clients; i++) {
        const s = net.connect(app.smtp!.port, '127.0.0.1');
        sockets.push(s);
      }
      const greetings = await Promise.all(sockets.map(greeted));
      expect(greetings.every((g) => g.startsWith('220'))).toBe(true);
      const extra = net.connect(app.smtp!.port, '127.0.0.1');
      sockets.push(extra);
      expect(await greeted(extra)).toMatch(/^421/);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});

describe('email ingest: the raw message is the retained source', () => {
  it('keeps the raw message byte for byte beside the envelope: DLQ export sourceBase64, usage envelope+raw, purged by retention', async () => {
    const { readUsage } = await import('../src/projects/usage.ts');
    const { projectId, apiKey } = await app.project('starter');
    const hook = await createWebhook(app, apiKey, { url: receiver.url });
    const raw = Buffer.from(
      [
        'From: Ana <a@x.test>',
        `To: ${hook.publicId}@${DOMAIN}`,
        'Subject: =?UTF-8?B?w6nDqQ==?=',
        'Message-ID: <raw-1@x.test>',
        'X-Odd:   spaced  ',
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 8bit',
        '',
        'h\u00e9llo',
        '',
        '',
      ].join('\r\n'),
      'utf8',
    );
    const before = (await readUsage(app.rt, projectId)).stored_payload_bytes;
    const info = await transport().sendMail({ envelope: { from: 'a@x.test', to: [`${hook.publicId}@${DOMAIN}`] }, raw });
    expect(info.response).toMatch(/^250 /);
    const { rows } = await db().query('SELECT e.id, e.body, e.source_body, e.source_content_type, d.id AS delivery_id FROM events e JOIN deliveries d ON d.event_id = e.id WHERE e.webhook_id = $1', [hook.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].source_content_type).toBe('message/rfc822');
    expect(Buffer.compare(rows[0].source_body, raw)).toBe(0);
    // The delivered body stays the envelope.
    expect(JSON.parse(rows[0].body.toString())).toMatchObject({ type: 'email.received', subject: 'éé' });
    expect((await readUsage(app.rt, projectId)).stored_payload_bytes).toBe(before + rows[0].body.length + raw.length);

    await waitFor(async () => (await db().query(`SELECT status FROM deliveries WHERE id = $1`, [rows[0].delivery_id])).rows[0].status === 'succeeded', 10_000);
    await db().query(`INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ('dlq_' || $1, $2, $3, $1, 'http_500')`, [rows[0].delivery_id, projectId, hook.id]);
    const exported = await app.api(apiKey, 'GET', `/v1/dlq/export?webhookId=${hook.id}`);
    expect(exported.status, JSON.stringify(exported.body)).toBe(200);
    const row = exported.body.items.find((i: any) => i.deliveryId === rows[0].delivery_id);
    expect(row.sourceContentType).toBe('message/rfc822');
    expect(Buffer.compare(Buffer.from(row.sourceBase64, 'base64'), raw)).toBe(0);
    expect(JSON.parse(Buffer.from(row.payloadBase64, 'base64').toString()).type).toBe('email.received');

    // Retention purges the source with the body, and counts both down.
    const put = await app.api(apiKey, 'PUT', `/v1/webhooks/${hook.id}/quota-overrides`, { payload_retention_seconds: 60 });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await retentionPass(app.rt, { now: new Date(Date.now() + 120_000) });
    const { rows: after } = await db().query('SELECT body, source_body FROM events WHERE id = $1', [rows[0].id]);
    expect(after[0]).toEqual({ body: null, source_body: null });
    expect((await readUsage(app.rt, projectId)).stored_payload_bytes).toBe(before);
  });

  it('counts the raw message against the stored-bytes quota at DATA: 452 when envelope + raw would not fit', async () => {
    const ent = await app.project('enterprise');
    // The envelope alone (about 3.4 KB) fits; with the raw message (about 3.2 KB) it does not.
    await setProjectQuota(app.rt, ent.projectId, 'stored_payload_bytes', '5000');
    const hook = await createWebhook(app, ent.apiKey, { url: receiver.url });
    const s = await session();
    try {
      expect(await s.send('EHLO client.test')).toMatch(/^250 /);
      expect(await s.send('MAIL FROM:<a@x.test>')).toMatch(/^250 /);
      expect(await s.send(`RCPT TO:<${hook.publicId}@${DOMAIN}>`)).toMatch(/^250 /);
      expect(await s.send('DATA')).toMatch(/^354 /);
      expect(await s.send(`Subject: big\r\n\r\n${'x'.repeat(3000)}\r\n.`)).toMatch(/^452 /);
    } finally {
      s.close();
    }
    expect(await events(hook.id)).toHaveLength(0);
  });

  it('refuses at RCPT with 452 a declared SIZE that would not fit the stored-bytes quota', async () => {
    const ent = await app.project('enterprise');
    await setProjectQuota(app.rt, ent.projectId, 'stored_payload_bytes', '10000');
    const hook = await createWebhook(app, ent.apiKey, { url: receiver.url });
    const s = await session();
    try {
      expect(await s.send('EHLO client.test')).toMatch(/^250 /);
      expect(await s.send('MAIL FROM:<a@x.test> SIZE=20000')).toMatch(/^250 /);
      expect(await s.send(`RCPT TO:<${hook.publicId}@${DOMAIN}>`)).toMatch(/^452 /);
      expect(await s.send('RSET')).toMatch(/^250 /);
      expect(await s.send('MAIL FROM:<a@x.test> SIZE=2000')).toMatch(/^250 /);
      expect(await s.send(`RCPT TO:<${hook.publicId}@${DOMAIN}>`)).toMatch(/^250 /);
    } finally {
      s.close();
    }
  });
});
