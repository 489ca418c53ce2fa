// Email sender allowlists (CONTRACT §12): the routes and their rules over REST and GraphQL, and
// the SMTP server dropping mail from a sender not allowed (250, nothing stored, counted).
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestEvents } from '../src/prom.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let starter: { projectId: string; apiKey: string };
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  starter = await app.project('starter');
});
afterAll(async () => {
  await app?.stop();
});

const DOMAIN = 'ingest.test';
const transport = () => nodemailer.createTransport({ host: '127.0.0.1', port: app.smtp!.port, secure: false, ignoreTLS: true, connectionTimeout: 5_000, socketTimeout: 10_000 } as any);
const events = (webhookId: string) => app.rt.db.prisma.event.count({ where: { webhookId } });
const refused = async () => (await ingestEvents.get()).values.find((v) => v.labels.channel === 'email' && v.labels.reason === 'sender_not_allowed')?.value ?? 0;
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
  });

  it('refuses malformed patterns with 400 param pattern', async () => {
    const wh = await createWebhook(app, starter.apiKey);
    for (const bad of ['ana @example.com', 'a@b@example.com', '@example.com', 'ana@', `${'a'.repeat(250)}@x.io`, '', 'not a domain', '*@*', 'localhost', 42]) {
      const res = await add(starter.apiKey, wh.id, bad);
      expect(res.status, String(bad)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'pattern' });
    }
  });

  it('lists on every tier; writes are Starter and above (403 after 404)', async () => {
    const free = await app.project('free');
    const wh = await createWebhook(app, free.apiKey);
    expect((await app.api(free.apiKey, 'GET', `/v1/webhooks/${wh.id}/email-allowlist`)).body).toEqual({ items: [], nextCursor: null });
    const res = await add(free.apiKey, wh.id, 'example.com');
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'email_allowlists', requiredTier: 'starter' });
    expect((await app.api(free.apiKey, 'DELETE', `/v1/webhooks/${wh.id}/email-allowlist/eal_x`)).status).toBe(403);
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
