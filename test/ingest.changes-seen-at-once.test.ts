/**
 * Management changes are seen at once by ingest (issue 28): once a management call has answered,
 * the next request of every channel (HTTP `/i`, form `/f`, SMTP RCPT and DATA, cron) in the
 * process that made it sees the change, and in every other process within a second. Ingest keeps
 * webhook lookups per process (src/ingest/ingest-target-cache.ts); each control is changed while
 * a lookup of it is kept, then every channel ingests at once.
 *
 * Two service instances share one database: `a` makes every change, and ingest runs either on `a`
 * (this process) or on `b` (another process). `a` is made deaf to the notifications of changes
 * (see beforeAll), so what it sees at once it saw by dropping its own lookups before answering;
 * `b` learns of them only by notification, which the test awaits (bounded: 1 s) before ingesting.
 */
import { createHmac } from 'node:crypto';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_TARGETS_TOPIC, ingestTargets } from '../src/ingest/ingest-target-cache.ts';
import { setProjectTier } from '../src/projects/service.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { runCli } from './support/processes.ts';
import { capturedStatements } from './support/statements.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let a: TestApp;
let b: TestApp;
let project: { projectId: string; apiKey: string };

beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ databaseUrl: a.databaseUrl });
  project = await ingestingProject(a);
  // `a` hears no notification of changed ingest targets (its own included): whatever it sees of
  // its own changes at once, it saw by dropping its lookups before answering.
  const pubsub = a.rt.pubsub as unknown as { dispatch(raw: string): Promise<void> };
  const dispatch = pubsub.dispatch.bind(pubsub);
  pubsub.dispatch = async (raw) => (raw.includes(`"${INGEST_TARGETS_TOPIC}"`) ? undefined : dispatch(raw));
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

type Hook = Awaited<ReturnType<typeof createWebhook>>;
type Via = { name: string; app: () => TestApp };
const THIS: Via = { name: 'in the process that made it', app: () => a };
const OTHER: Via = { name: 'in another process', app: () => b };

const kept = (app: TestApp, wh: Hook) => ingestTargets(app.rt).has(wh.publicId);

/** Rejects when `p` has not settled within `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Makes a change on `a` (`change` answers once it has) while `via` keeps a lookup of `wh`, and
 * returns once `via` has dropped it: at once on `a`; on `b`, when the change's notification
 * reaches it, which must be within 1 s of the answer.
 */
async function changeSeen<T>(via: Via, wh: Hook, change: () => Promise<T>): Promise<T> {
  const app = via.app();
  expect(kept(app, wh), 'a lookup of the webhook is kept before the change').toBe(true);
  const notes = app === b ? b.rt.pubsub.subscribe(INGEST_TARGETS_TOPIC, (p) => ((p as { publicIds: string[] }).publicIds.includes(wh.publicId) ? true : undefined)) : null;
  try {
    const answer = await change();
    if (notes) await within(notes.next(), 1_000, 'the change notified to the other process');
    expect(kept(app, wh), 'the lookup is dropped once the change has answered').toBe(false);
    return answer;
  } finally {
    await notes?.return?.();
  }
}

const secretHeader = (secret: string) => ({ 'x-webhook-secret': secret });

/** A form post (multipart) with the ingest secret as the `_secret` field, and optionally a file. */
async function form(app: TestApp, wh: Hook, opts: { secret?: string; headers?: Record<string, string>; file?: Buffer } = {}) {
  const body = new FormData();
  body.append('name', 'Ana');
  body.append('_secret', opts.secret ?? wh.ingestSecret);
  if (opts.file) body.append('doc', new Blob([new Uint8Array(opts.file)], { type: 'application/octet-stream' }), 'doc.bin');
  const res = await fetch(`${app.url}/f/${wh.publicId}`, { method: 'POST', body, headers: opts.headers, redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A mail to the webhook: the SMTP code RCPT or DATA answered (250: stored), and the stored event's id. */
async function mail(app: TestApp, wh: Hook, attachment?: Buffer): Promise<{ code: number; command: string; response: string; eventId?: string }> {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: app.smtp!.port, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000 });
  try {
    const info = await transport.sendMail({
      from: 'ana@x.test',
      to: `${wh.publicId}@${app.rt.config.EMAIL_DOMAIN}`,
      subject: 'hello',
      text: 'hello',
      attachments: attachment ? [{ filename: 'a.bin', content: attachment, contentType: 'application/octet-stream' }] : [],
    });
    return { code: 250, command: 'DATA', response: info.response, eventId: /Stored as (evt_\w+)/.exec(info.response)?.[1] };
  } catch (err) {
    const e = err as { responseCode?: number; command?: string; response?: string };
    return { code: e.responseCode ?? 0, command: e.command ?? '', response: e.response ?? String(err) };
  } finally {
    transport.close();
  }
}

async function schedule(wh: Hook): Promise<string> {
  const res = await a.api(project.apiKey, 'POST', `/v1/webhooks/${wh.id}/schedules`, { cron: '0 3 * * *', payload: { tick: true } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}
/** One tick of the schedule now, through `app`'s cron channel. */
const tick = (app: TestApp, wh: Hook, scheduleId: string) => app.api(project.apiKey, 'POST', `/v1/webhooks/${wh.id}/schedules/${scheduleId}/trigger`);

const eventBody = async (eventId: string) => JSON.parse((await a.rt.db.pool.query('SELECT body FROM events WHERE id = $1', [eventId])).rows[0].body.toString());
const destinationUrl = async (eventId: string) => (await a.rt.db.pool.query('SELECT destination FROM deliveries WHERE event_id = $1', [eventId])).rows[0]?.destination.config.url;

describe.each([THIS, OTHER])('a change is seen by every channel at once, $name', (via) => {
  it('pause, then resume: refused while paused (HTTP 409, form 409, RCPT 450, cron 409), taken right after the resume', async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey);
    const scheduleId = await schedule(wh);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(202);

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`)).status).toBe(200));
    const mailed = await mail(app, wh);
    expect([mailed.code, mailed.command]).toEqual([450, 'RCPT TO']);
    expect(mailed.response).toMatch(/Mailbox paused/);
    const http = await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) });
    expect([http.status, http.body.error.code]).toEqual([409, 'webhook_paused']);
    const posted = await form(app, wh);
    expect([posted.status, posted.body.error.code]).toEqual([409, 'webhook_paused']);
    const ticked = await tick(app, wh, scheduleId);
    expect([ticked.status, ticked.body.error.code]).toEqual([409, 'webhook_paused']);

    // The paused lookup is the one kept now: the resume must replace it.
    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`)).status).toBe(200));
    const resumed = await mail(app, wh);
    expect(resumed.code, resumed.response).toBe(250);
    expect(resumed.eventId).toMatch(/^evt_/);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(202);
    expect((await form(app, wh)).status).toBe(202);
    expect((await tick(app, wh, scheduleId)).status).toBe(202);
  });

  it('dedupeWindowSeconds 600 → 0: a resend is no longer answered duplicate (HTTP and form)', async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey, { dedupeWindowSeconds: 600 });
    const send = () => ingest(app, wh.publicId, { headers: { ...secretHeader(wh.ingestSecret), 'webhook-id': 'msg_http' } });
    const post = () => form(app, wh, { headers: { 'webhook-id': 'msg_form' } });
    const first = await send();
    expect(first.body.status).toBe('queued');
    expect((await send()).body).toMatchObject({ status: 'duplicate', eventId: first.body.eventId });
    const firstPost = await post();
    expect(firstPost.body.status).toBe('queued');
    expect((await post()).body).toMatchObject({ status: 'duplicate', eventId: firstPost.body.eventId });

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { dedupeWindowSeconds: 0 })).status).toBe(200));
    const again = await send();
    expect([again.status, again.body.status]).toEqual([202, 'queued']);
    expect(again.body.eventId).not.toBe(first.body.eventId);
    const postedAgain = await post();
    expect([postedAgain.status, postedAgain.body.status]).toEqual([202, 'queued']);
  });

  it('ingest secret rotated with no grace: the old secret is 401 and the new one taken (HTTP and form)', async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(202);
    expect((await form(app, wh)).status).toBe(202);

    const rotated = await changeSeen(via, wh, () => a.api(project.apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, { graceSeconds: 0 }));
    expect(rotated.status).toBe(200);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(401);
    expect((await form(app, wh)).status).toBe(401);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(rotated.body.ingestSecret) })).status).toBe(202);
    expect((await form(app, wh, { secret: rotated.body.ingestSecret })).status).toBe(202);
  });

  it("provider settings: a provider pack removed no longer authenticates, one set again with another secret does (HTTP)", async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey);
    const signed = (secret: string) => {
      const body = JSON.stringify({ zen: 'hi' });
      return ingest(app, wh.publicId, { body, headers: { 'x-github-event': 'ping', 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` } });
    };
    expect((await a.api(project.apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'github', secret: 'gh-one' })).status).toBe(200);
    expect((await signed('gh-one')).status).toBe(202);

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: null })).status).toBe(200));
    expect((await signed('gh-one')).status).toBe(401);

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'github', secret: 'gh-two' })).status).toBe(200));
    expect((await signed('gh-two')).status).toBe(202);
    expect((await signed('gh-one')).status).toBe(401);
  });

  it('a quota override set, then removed: refused at once (HTTP 409, form 409, RCPT 452, cron 409), then taken at once', async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey);
    const scheduleId = await schedule(wh);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(202);

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { stored_payload_bytes: 1 })).status).toBe(200));
    const refused = { quota: 'stored_payload_bytes' };
    const http = await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) });
    expect(http.status).toBe(409);
    expect(http.body.error).toMatchObject(refused);
    const posted = await form(app, wh);
    expect(posted.status).toBe(409);
    expect(posted.body.error).toMatchObject(refused);
    const mailed = await mail(app, wh);
    expect([mailed.code, mailed.command]).toEqual([452, 'RCPT TO']);
    const ticked = await tick(app, wh, scheduleId);
    expect(ticked.status).toBe(409);
    expect(ticked.body.error).toMatchObject(refused);

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { stored_payload_bytes: null })).status).toBe(200));
    expect((await mail(app, wh)).code).toBe(250);
    expect((await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).status).toBe(202);
    expect((await form(app, wh)).status).toBe(202);
    expect((await tick(app, wh, scheduleId)).status).toBe(202);
  });

  it("the default destination changed: every channel's next delivery goes to the new one", async () => {
    const app = via.app();
    const wh = await createWebhook(a, project.apiKey, { url: 'https://example.com/before' });
    const scheduleId = await schedule(wh);
    const before = await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) });
    expect(await destinationUrl(before.body.eventId)).toBe('https://example.com/before');

    await changeSeen(via, wh, async () => expect((await a.api(project.apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { url: 'https://example.com/after' })).status).toBe(200));
    const events = [
      (await ingest(app, wh.publicId, { headers: secretHeader(wh.ingestSecret) })).body.eventId,
      (await form(app, wh)).body.eventId,
      (await mail(app, wh)).eventId,
      (await tick(app, wh, scheduleId)).body.eventId,
    ];
    for (const eventId of events) expect(await destinationUrl(eventId)).toBe('https://example.com/after');
  });

  it("the project's tier raised (Free → Starter): form files and mail attachments are kept at once", async () => {
    const app = via.app();
    const free = await a.project('free');
    const wh = await createWebhook(a, free.apiKey);
    const file = Buffer.alloc(2048, 7);
    const measured = await form(app, wh, { file });
    expect(measured.status).toBe(202);
    expect((await eventBody(measured.body.eventId)).files[0].fileRef).toBeUndefined();

    await changeSeen(via, wh, () => setProjectTier(a.rt, free.projectId, 'starter'));
    const posted = await form(app, wh, { file });
    expect(posted.status).toBe(202);
    expect((await eventBody(posted.body.eventId)).files[0].fileRef).toMatchObject({ id: expect.stringMatching(/^file_/) });
    const mailed = await mail(app, wh, file);
    expect(mailed.code, mailed.response).toBe(250);
    expect((await eventBody(mailed.eventId!)).attachments[0].fileRef).toMatchObject({ id: expect.stringMatching(/^file_/) });
  });
});

describe('changes made outside the API processes', () => {
  it('a tier change by the admin CLI reaches another process within 1 s', async () => {
    const free = await a.project('free');
    const wh = await createWebhook(a, free.apiKey);
    const file = Buffer.alloc(1024, 3);
    const measured = await form(b, wh, { file });
    expect((await eventBody(measured.body.eventId)).files[0].fileRef).toBeUndefined();

    await changeSeen(OTHER, wh, async () => {
      const cli = await runCli({ DATABASE_URL: a.databaseUrl }, ['project', 'set-tier', free.projectId, 'starter']);
      expect(cli.code, cli.output).toBe(0);
    });
    const posted = await form(b, wh, { file });
    expect((await eventBody(posted.body.eventId)).files[0].fileRef).toMatchObject({ id: expect.stringMatching(/^file_/) });
  });
});

describe('the LISTEN connection', () => {
  it('lost: every kept lookup is dropped and none is kept until it is back; a change made meanwhile is seen', async () => {
    const wh = await createWebhook(a, project.apiKey, { url: 'https://example.com/before' });
    const send = () => ingest(b, wh.publicId, { headers: secretHeader(wh.ingestSecret) });
    expect((await send()).status).toBe(202);
    expect(kept(b, wh)).toBe(true);

    const pubsub = b.rt.pubsub as unknown as { connect(): Promise<void>; client: { processID: number } };
    const connect = pubsub.connect;
    // `b` reconnects on its own (after 500 ms); held here until the test lets it.
    let letConnect: () => void = () => {};
    const gate = new Promise<void>((r) => (letConnect = r));
    pubsub.connect = async function (this: unknown) {
      await gate;
      return connect.call(this);
    };
    const states: boolean[] = [];
    let back: () => void = () => {};
    const reconnected = new Promise<void>((r) => (back = r));
    let lost: () => void = () => {};
    const noticed = new Promise<void>((r) => (lost = r));
    const unwatch = b.rt.pubsub.onListening((listening) => {
      states.push(listening);
      (listening ? back : lost)();
    });
    try {
      await a.rt.db.pool.query('SELECT pg_terminate_backend($1)', [pubsub.client.processID]);
      await within(noticed, 1_000, 'the lost connection noticed');
      expect(b.rt.pubsub.listening).toBe(false);
      expect(kept(b, wh)).toBe(false);
      // A change committed while `b` is not listening: its notification never reaches `b`.
      expect((await a.api(project.apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { url: 'https://example.com/after' })).status).toBe(200);
      for (let i = 0; i < 2; i++) {
        const reads = await capturedStatements(b.rt.db.pool, async () => {
          const accepted = await send();
          expect(await destinationUrl(accepted.body.eventId)).toBe('https://example.com/after');
        });
        // Read for each request, never kept.
        expect(reads[0]).toBe('find_ingest_target');
        expect(kept(b, wh)).toBe(false);
      }
      letConnect();
      await within(reconnected, 5_000, 'the LISTEN connection back');
      expect(states).toEqual([false, true]);
      expect((await send()).status).toBe(202);
      expect(kept(b, wh)).toBe(true);
    } finally {
      letConnect();
      delete (pubsub as { connect?: unknown }).connect;
      unwatch();
    }
  });
});
