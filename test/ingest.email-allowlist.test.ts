// Email sender allowlists (CONTRACT §12): the routes and their rules over REST and GraphQL, and
// the SMTP server dropping mail from a sender not allowed (250, nothing stored, counted).
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_TARGETS_TOPIC, ingestTargets } from '../src/ingest/ingest-target-cache.ts';
import { ingestEvents } from '../src/prom.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
/** Another API process on the same database: a change made there reaches `app` only by notification. */
let other: TestApp;
let starter: { projectId: string; apiKey: string };
/** While true, `app` hears no notification of changed ingest lookups (one not arrived yet). */
let deaf = false;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  other = await startTestApp({ databaseUrl: app.databaseUrl, worker: false });
  starter = await app.project('starter');
  const pubsub = app.rt.pubsub as unknown as { dispatch(raw: string): Promise<void> };
  const dispatch = pubsub.dispatch.bind(pubsub);
  pubsub.dispatch = async (raw) => (deaf && raw.includes(`"${INGEST_TARGETS_TOPIC}"`) ? undefined : dispatch(raw));
});
afterAll(async () => {
  await other?.stop();
  await app?.stop();
});

const DOMAIN = 'ingest.test';
const transport = () => nodemailer.createTransport({ host: '127.0.0.1', port: app.smtp!.port, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000 } as any);
const events = (webhookId: string) => app.rt.db.prisma.event.count({ where: { webhookId } });
const counted = async (result: string, reason = '') =>
  (await ingestEvents.get()).values.find((v) => v.labels.channel === 'email' && v.labels.result === result && v.labels.reason === reason)?.value ?? 0;
const refused = () => counted('refused', 'sender_not_allowed');
/** The email ingest counters now: accepted, dropped (sender_not_allowed), refused paused. */
const counters = async () => ({ accepted: await counted('accepted'), dropped: await refused(), paused: await counted('refused', 'webhook_paused') });
const delta = async (before: Awaited<ReturnType<typeof counters>>) => {
  const now = await counters();
  return { accepted: now.accepted - before.accepted, dropped: now.dropped - before.dropped, paused: now.paused - before.paused };
};
const add = (apiKey: string, webhookId: string, pattern: unknown) => app.api(apiKey, 'POST', `/v1/webhooks/${webhookId}/email-allowlist`, { pattern });

describe('the allowlist routes', () => {
  it('adds (201, stored lower-cased, a domain form as the domain), lists, refuses duplicates (409) and deletes', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    const a = await add(starter.apiKey, wh.id, 'Ana@Example.COM');
    expect(a.status).toBe(201);
    expect(a.body).toEqual({ id: expect.stringMatching(/^eal_/), pattern: 'ana@example.com', createdAt: expect.any(String) });
    expect((await add(starter.apiKey, wh.id, '*@Partner.test')).body.pattern).toBe('partner.test');
    expect((await add(starter.apiKey, wh.id, 'alerts@*')).body.pattern).toBe('alerts@*');
    const dup = await add(starter.apiKey, wh.id, 'partner.test');
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('already_exists');
    expect((await add(starter.apiKey, wh.id, 'ANA@example.com')).status).toBe(409);

    const page1 = await app.api(starter.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist?limit=2`);
    expect(page1.body.items.map((e: any) => e.pattern)).toEqual(['ana@example.com', 'partner.test']);
    const page2 = await app.api(starter.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist?limit=2&cursor=${page1.body.nextCursor}`);
    expect(page2.body).toEqual({ items: [expect.objectContaining({ pattern: 'alerts@*' })], nextCursor: null });

    const del = await app.api(starter.apiKey, 'DELETE', `/v1/webhooks/${wh.id}/email-allowlist/${a.body.id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ id: a.body.id, deleted: true });
    expect((await app.api(starter.apiKey, 'DELETE', `/v1/webhooks/${wh.id}/email-allowlist/${a.body.id}`)).status).toBe(404);

    const gql = await app.api(starter.apiKey, 'POST', '/graphql', {
      query: `mutation { addEmailAllowlistEntry(id: "${wh.id}", pattern: "ops@example.org") { id pattern } }`,
    });
    expect(gql.body.data.addEmailAllowlistEntry.pattern).toBe('ops@example.org');
    const listed = await app.api(starter.apiKey, 'POST', '/graphql', { query: `{ webhookEmailAllowlist(id: "${wh.id}") { items { pattern } nextCursor } }` });
    expect(listed.body.data.webhookEmailAllowlist.items.map((e: any) => e.pattern)).toEqual(['partner.test', 'alerts@*', 'ops@example.org']);
    const gqlDup = await app.api(starter.apiKey, 'POST', '/graphql', { query: `mutation { addEmailAllowlistEntry(id: "${wh.id}", pattern: "*@partner.test") { id } }` });
    expect(gqlDup.body.errors[0].extensions.code).toBe('already_exists');
    const gqlDel = await app.api(starter.apiKey, 'POST', '/graphql', {
      query: `mutation { deleteEmailAllowlistEntry(id: "${wh.id}", entryId: "${gql.body.data.addEmailAllowlistEntry.id}") { id deleted } }`,
    });
    expect(gqlDel.body.data.deleteEmailAllowlistEntry).toEqual({ id: gql.body.data.addEmailAllowlistEntry.id, deleted: true });
    const after = await app.api(starter.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist`);
    expect(after.body.items.map((e: any) => e.pattern)).toEqual(['partner.test', 'alerts@*']);
  });

  it('refuses malformed patterns with 400 param pattern', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    for (const bad of ['ana @example.com', 'a@b@example.com', '@example.com', 'ana@', `${'a'.repeat(250)}@x.io`, '', 'not a domain', '*@*', 'localhost', 42]) {
      const res = await add(starter.apiKey, wh.id, bad);
      expect(res.status, String(bad)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'pattern' });
    }
    // 254 characters is the most a pattern may have (the 255 above is one too many); tabs are spaces too.
    const longest = `${'a'.repeat(249)}@x.io`;
    expect(longest).toHaveLength(254);
    expect((await add(starter.apiKey, wh.id, longest)).status).toBe(201);
    expect((await add(starter.apiKey, wh.id, 'ana\t@example.com')).status).toBe(400);
    const gql = await app.api(starter.apiKey, 'POST', '/graphql', { query: `mutation { addEmailAllowlistEntry(id: "${wh.id}", pattern: "a@b@example.com") { id } }` });
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'pattern' });
  });

  it('lists on every tier; writes are Starter and above (403 after 404)', async () => {
    const free = await app.project('free');
    const wh = await createWebhook(app, free.apiKey);
    expect((await app.api(free.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist`)).body).toEqual({ items: [], nextCursor: null });
    const res = await add(free.apiKey, wh.id, 'example.com');
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'email_allowlists', requiredTier: 'starter' });
    expect((await app.api(free.apiKey, 'DELETE', `/v1/webhooks/${wh.id}/email-allowlist/eal_x`)).status).toBe(403);
    const gql = await app.api(free.apiKey, 'POST', '/graphql', { query: `mutation { addEmailAllowlistEntry(id: "${wh.id}", pattern: "example.com") { id } }` });
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'tier_required', feature: 'email_allowlists', requiredTier: 'starter' });
    expect((await app.api(free.apiKey, 'POST', '/graphql', { query: `{ webhookEmailAllowlist(id: "${wh.id}") { items { id } } }` })).body.data.webhookEmailAllowlist.items).toEqual([]);
    expect((await add(free.apiKey, 'wh_unknown', 'example.com')).status).toBe(404);
    // Another project's webhook is not found.
    expect((await app.api(starter.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist`)).status).toBe(404);
  });
});

describe('mail from senders', () => {
  it('takes every sender with an empty list; with entries, drops the others with 250, storing nothing, counted', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    const to = `${wh.publicId}@${DOMAIN}`;
    expect((await transport().sendMail({ from: 'anyone@else.test', to, subject: 'open', text: 'x' })).response).toMatch(/^250 /);
    expect(await events(wh.id)).toBe(1);

    await add(starter.apiKey, wh.id, 'example.com');
    await add(starter.apiKey, wh.id, 'alerts@*');
    await add(starter.apiKey, wh.id, 'ana@partner.test');
    const before = await refused();
    for (const from of ['bo@EXAMPLE.com', 'alerts@monitoring.test', 'Ana@Partner.test']) {
      expect((await transport().sendMail({ from, to, subject: 'ok', text: 'x' })).response, from).toMatch(/^250 2\.0\.0 Stored as evt_/);
    }
    expect(await events(wh.id)).toBe(4);
    for (const from of ['bo@sub.example.com', 'ops@monitoring.test', 'bo@partner.test', 'mallory@evil.test']) {
      const info = await transport().sendMail({ from, to, subject: 'dropped', text: 'x' });
      expect(info.response, from).toMatch(/^250 /);
      expect(info.response).not.toMatch(/evt_/);
    }
    expect(await events(wh.id)).toBe(4);
    expect((await refused()) - before).toBe(4);
  });

  it("matches the From: address, else the envelope's MAIL FROM", async () => {
    const wh = await createWebhook(app, starter.apiKey);
    await add(starter.apiKey, wh.id, 'example.com');
    const to = `${wh.publicId}@${DOMAIN}`;
    // From: not allowed, envelope allowed: dropped.
    await transport().sendMail({ envelope: { from: 'bounce@example.com', to }, from: 'ana@elsewhere.test', to, subject: 'x', text: 'x' });
    expect(await events(wh.id)).toBe(0);
    // From: allowed, envelope not: taken.
    await transport().sendMail({ envelope: { from: 'bounce@elsewhere.test', to }, from: 'ana@example.com', to, subject: 'x', text: 'x' });
    expect(await events(wh.id)).toBe(1);
    // No From: header at all: the envelope decides.
    const raw = `To: ${to}\r\nSubject: no from\r\n\r\nbody\r\n`;
    await transport().sendMail({ envelope: { from: 'sys@example.com', to: [to] }, raw });
    expect(await events(wh.id)).toBe(2);
  });

  it('sees a change to the list with the next mail', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    const entry = await add(starter.apiKey, wh.id, 'only@example.com');
    const to = `${wh.publicId}@${DOMAIN}`;
    await transport().sendMail({ from: 'bo@example.com', to, subject: 'x', text: 'x' });
    expect(await events(wh.id)).toBe(0);
    await add(starter.apiKey, wh.id, 'bo@example.com');
    await transport().sendMail({ from: 'bo@example.com', to, subject: 'x', text: 'x' });
    expect(await events(wh.id)).toBe(1);
    // Deleting every entry opens the list again.
    const list = (await app.api(starter.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist`)).body.items;
    for (const e of [entry.body, ...list.filter((x: any) => x.id !== entry.body.id)]) await app.api(starter.apiKey, 'DELETE', `/v1/webhooks/${wh.id}/email-allowlist/${e.id}`);
    await transport().sendMail({ from: 'zed@nowhere.test', to, subject: 'x', text: 'x' });
    expect(await events(wh.id)).toBe(2);
  });
});

describe('a list changed in another process, not yet heard of here', () => {
  // `app` keeps the webhook's lookup from before the change: the mail passes the first check on
  // it, and the ingest statement (config_version changed) sends it to a fresh lookup, whose
  // allowlist refuses the sender. That second check drops the mail just the same: 250, nothing
  // stored, counted once with its reason.
  const keptHere = (wh: { publicId: string }) => ingestTargets(app.rt).has(wh.publicId);
  const addElsewhere = (webhookId: string, pattern: string) => other.api(starter.apiKey, 'POST', `/v1/webhooks/${webhookId}/email-allowlist`, { pattern });

  it('drops a mail for one webhook on the second check: 250, nothing stored, counted once as sender_not_allowed', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    const to = `${wh.publicId}@${DOMAIN}`;
    await transport().sendMail({ from: 'ana@example.com', to, subject: 'open', text: 'x' });
    expect(keptHere(wh)).toBe(true);
    deaf = true;
    try {
      expect((await addElsewhere(wh.id, 'example.com')).status).toBe(201);
      expect(keptHere(wh), 'the lookup from before the change is still kept here').toBe(true);
      const before = await counters();
      const info = await transport().sendMail({ from: 'mallory@evil.test', to, subject: 'dropped', text: 'x' });
      expect(info.response).toMatch(/^250 /);
      expect(info.response).not.toMatch(/evt_/);
      expect(await events(wh.id)).toBe(1);
      expect(await delta(before)).toEqual({ accepted: 0, dropped: 1, paused: 0 });
    } finally {
      deaf = false;
    }
  });

  it('in a mail for several webhooks: the others take it, the dropped one is counted once, and only when the mail is taken', async () => {
    const [taker, dropper, paused] = [await createWebhook(app, starter.apiKey), await createWebhook(app, starter.apiKey), await createWebhook(app, starter.apiKey)];
    const to = [taker, dropper, paused].map((w) => `${w.publicId}@${DOMAIN}`);
    await transport().sendMail({ from: 'ana@example.com', to, subject: 'open', text: 'x' });
    for (const w of [taker, dropper, paused]) expect(keptHere(w)).toBe(true);
    deaf = true;
    try {
      expect((await addElsewhere(dropper.id, 'example.com')).status).toBe(201);
      expect((await other.api(starter.apiKey, 'POST', `/v1/webhooks/${paused.id}/pause`)).status).toBe(200);
      // Every RCPT passes on the kept lookups; at DATA the paused webhook refuses the whole mail
      // (450, all or nothing): nothing is stored, and nothing counted but that refusal.
      let before = await counters();
      const err = await transport()
        .sendMail({ from: 'mallory@evil.test', to, subject: 'try', text: 'x' })
        .then(() => null, (e: { responseCode?: number }) => e);
      expect(err?.responseCode).toBe(450);
      for (const w of [taker, dropper, paused]) expect(await events(w.id)).toBe(1);
      expect(await delta(before)).toEqual({ accepted: 0, dropped: 0, paused: 1 });

      // The sender tries again once the webhook is resumed: taken by two, dropped by one, counted once.
      expect((await other.api(starter.apiKey, 'POST', `/v1/webhooks/${paused.id}/resume`)).status).toBe(200);
      before = await counters();
      const info = await transport().sendMail({ from: 'mallory@evil.test', to, subject: 'again', text: 'x' });
      expect(info.response).toMatch(/^250 2\.0\.0 Stored as evt_\w+ evt_\w+$/);
      expect([await events(taker.id), await events(dropper.id), await events(paused.id)]).toEqual([2, 1, 2]);
      expect(await delta(before)).toEqual({ accepted: 2, dropped: 1, paused: 0 });
    } finally {
      deaf = false;
    }
  });
});
