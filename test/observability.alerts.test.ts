import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateAlerts } from '../src/alerts/evaluate.ts';
import { isSlackUrl } from '../src/alerts/channels.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let smtp: SMTPServer;
const mails: { to: string[]; body: string }[] = [];
/** Delivery targets: each path answers the status set here (default 200). */
const answers = new Map<string, number>();
let target: Awaited<ReturnType<typeof startReceiver>>;
let alertSink: Awaited<ReturnType<typeof startReceiver>>;
let failAlertsOnce = true;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c) => chunks.push(c));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), body: Buffer.concat(chunks).toString() });
        cb();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
  const smtpPort = (smtp.server.address() as AddressInfo).port;
  app = await startTestApp({ worker: true, config: { ALERT_SMTP_URL: `smtp://127.0.0.1:${smtpPort}`, ALERT_WEBHOOK_TRIES: 2 } });
  target = await startReceiver((r) => ({ status: answers.get(r.url) ?? 200 }));
  alertSink = await startReceiver(() => {
    if (failAlertsOnce) {
      failAlertsOnce = false;
      return { status: 503 };
    }
    return { status: 200 };
  });
});
afterAll(async () => {
  await app?.stop();
  await target?.close();
  await alertSink?.close();
  await new Promise<void>((r) => smtp?.close(() => r()));
});

/** One evaluation by this test (the recurring job may hold the lock for a moment). */
async function evaluate() {
  await waitFor(async () => (await evaluateAlerts(app.rt)).ran, 10_000, 50);
}

/** The rule's dispatches, oldest first, once their channels were tried (each dispatch is sent by a job of its own). */
async function dispatches(apiKey: string, ruleId: string) {
  const items = await waitFor(async () => {
    const res = await app.api(apiKey, 'GET', `/v1/project/alert-dispatches?ruleId=${ruleId}`);
    expect(res.status).toBe(200);
    const items = res.body.items as any[];
    return items.every((d) => d.channels.every((c: any) => c.status !== 'pending')) ? items : null;
  }, 15_000);
  return items!.reverse();
}

/** Waits until the webhook's n deliveries finished and their attempts reached the roll-ups (written once a second). */
async function finished(apiKey: string, webhookId: string, n: number) {
  await waitFor(async () => {
    const items = (await app.api(apiKey, 'GET', `/v1/webhooks/${webhookId}/deliveries?limit=100`)).body.items;
    return items.length === n && items.every((d: any) => d.status === 'succeeded' || d.status === 'failed');
  }, 15_000);
  await waitFor(async () => {
    const { rows } = await app.rt.db.pool.query('SELECT coalesce(sum(attempts), 0)::int AS n FROM webhook_metric_buckets WHERE webhook_id = $1 AND size = 60', [webhookId]);
    return rows[0].n >= n;
  }, 10_000);
}

const send = async (wh: { publicId: string; ingestSecret: string }, n = 1) => {
  for (let i = 0; i < n; i++) expect((await ingest(app, wh.publicId, { headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
};

describe('operator alerting', () => {
  it('rules: Pro and above, validation, CRUD', async () => {
    const starter = await app.project('starter');
    const denied = await app.api(starter.apiKey, 'POST', '/v1/project/alert-rules', { condition: { type: 'backlog_depth', threshold: 1 }, channels: [{ type: 'email', to: 'a@b.co' }] });
    expect(denied.status).toBe(403);
    expect(denied.body.error).toMatchObject({ code: 'tier_required', requiredTier: 'pro' });
    expect((await app.api(starter.apiKey, 'GET', '/v1/project/alert-dispatches')).status).toBe(403);
    const { apiKey } = await app.project('pro');
    const bad = [
      [{ condition: { type: 'nope', threshold: 1 }, channels: [{ type: 'email', to: 'a@b.co' }] }, 'condition'],
      [{ condition: { type: 'failure_rate', threshold: 2 }, channels: [{ type: 'email', to: 'a@b.co' }] }, 'condition'],
      [{ condition: { type: 'dlq_added', threshold: 1 }, channels: [{ type: 'sms', to: '1' }] }, 'channels'],
      [{ condition: { type: 'dlq_added', threshold: 1 } }, 'channels'],
      [{ condition: { type: 'dlq_added', threshold: 1 }, channels: [{ type: 'email', to: 'a@b.co' }], webhookId: 'wh_nope' }, 'webhookId'],
    ] as const;
    for (const [body, param] of bad) {
      const res = await app.api(apiKey, 'POST', '/v1/project/alert-rules', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.param).toMatch(new RegExp(`^${param}`));
    }
    const created = await app.api(apiKey, 'POST', '/v1/project/alert-rules', { name: 'dlq', condition: { type: 'dlq_added', threshold: 1 }, channels: [{ type: 'email', to: 'ops@example.com' }] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'dlq', webhookId: null, condition: { type: 'dlq_added', threshold: 1, windowSeconds: 300 }, cooldownSeconds: 3600, enabled: true, state: 'ok' });
    expect(created.body.id).toMatch(/^alr_/);
    expect(created.body.signingSecret).toMatch(/^whsec_/);
    const got = await app.api(apiKey, 'GET', `/v1/project/alert-rules/${created.body.id}`);
    expect(got.body.signingSecret).toBeUndefined();
    expect((await app.api(apiKey, 'PATCH', `/v1/project/alert-rules/${created.body.id}`, { cooldownSeconds: 60, enabled: false })).body).toMatchObject({ cooldownSeconds: 60, enabled: false });
    expect((await app.api(apiKey, 'GET', '/v1/project/alert-rules')).body.items).toHaveLength(1);
    expect((await app.api(apiKey, 'GET', '/v1/project/alert-dispatches?state=maybe')).status).toBe(400);
    expect((await app.api(apiKey, 'DELETE', `/v1/project/alert-rules/${created.body.id}`)).body).toEqual({ id: created.body.id, deleted: true });
    expect((await app.api(apiKey, 'GET', `/v1/project/alert-rules/${created.body.id}`)).status).toBe(404);
    expect(isSlackUrl('https://hooks.slack.com/services/T/B/X')).toBe(true);
    expect(isSlackUrl('https://example.com/hooks.slack.com')).toBe(false);
  });

  it('backlog_depth fires once, is delivered (signed webhook, retried; email), cools down and resolves', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: `${target.url}/backlog` });
    const rule = await app.api(apiKey, 'POST', '/v1/project/alert-rules', {
      name: 'backlog',
      webhookId: wh.id,
      condition: { type: 'backlog_depth', threshold: 2 },
      channels: [{ type: 'webhook', url: `${alertSink.url}/backlog` }, { type: 'email', to: 'ops@example.com' }],
    });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const schedule = async () => {
      for (let i = 0; i < 3; i++) await ingest(app, wh.publicId, { headers: { authorization: `Bearer ${wh.ingestSecret}`, 'x-service-deliver-at': later } });
    };
    await schedule();
    await evaluate();
    await evaluate();
    let d = await dispatches(apiKey, rule.body.id);
    expect(d.map((x) => x.state)).toEqual(['firing']);
    expect(d[0]).toMatchObject({ ruleId: rule.body.id, value: 3 });
    expect(d[0].channels).toEqual([
      { type: 'webhook', target: `${alertSink.url}/backlog`, status: 'sent', error: null },
      { type: 'email', target: 'ops@example.com', status: 'sent', error: null },
    ]);
    // The webhook channel: tried again after a 503, the same message both times, verifiable with the rule's secret.
    const posts = alertSink.received.filter((r) => r.url === '/backlog');
    expect(posts).toHaveLength(2);
    expect(posts[0].headers['webhook-id']).toBe(posts[1].headers['webhook-id']);
    const msg = new Webhook(rule.body.signingSecret).verify(posts[1].body.toString(), posts[1].headers as Record<string, string>);
    expect(msg).toMatchObject({ type: 'alert.firing', ruleId: rule.body.id, dispatchId: d[0].id, webhookId: wh.id, value: 3, threshold: 2 });
    expect(mails.some((m) => m.to.includes('ops@example.com') && m.body.includes(rule.body.id) && m.body.includes('alert.firing'))).toBe(true);

    // The backlog goes: resolved.
    await app.rt.db.pool.query('DELETE FROM deliveries WHERE webhook_id = $1', [wh.id]);
    await evaluate();
    d = await dispatches(apiKey, rule.body.id);
    expect(d.map((x) => x.state)).toEqual(['firing', 'resolved']);
    expect(alertSink.received.filter((r) => r.url === '/backlog').map((r) => JSON.parse(r.body.toString()).type).at(-1)).toBe('alert.resolved');
    await waitFor(() => mails.some((m) => m.body.includes('alert.resolved')), 5_000);

    // Back within the cooldown: no second firing; with the cooldown at 0 it fires again.
    await schedule();
    await evaluate();
    expect((await dispatches(apiKey, rule.body.id)).map((x) => x.state)).toEqual(['firing', 'resolved']);
    await app.api(apiKey, 'PATCH', `/v1/project/alert-rules/${rule.body.id}`, { cooldownSeconds: 0 });
    await evaluate();
    expect((await dispatches(apiKey, rule.body.id)).map((x) => x.state)).toEqual(['firing', 'resolved', 'firing']);
    const firing = await app.api(apiKey, 'GET', `/v1/project/alert-dispatches?ruleId=${rule.body.id}&state=firing&limit=1`);
    expect(firing.body.items).toHaveLength(1);
    expect(firing.body.nextCursor).toEqual(expect.any(String));
  }, 30_000);

  it('failure_rate, consecutive_failures and dlq_added fire once and resolve', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: `${target.url}/flaky`, retryPolicy: { maxAttempts: 1 } });
    const channels = [{ type: 'webhook', url: `${alertSink.url}/rates` }];
    const make = async (condition: unknown) => (await app.api(apiKey, 'POST', '/v1/project/alert-rules', { webhookId: wh.id, condition, channels, cooldownSeconds: 3600 })).body.id as string;
    const rate = await make({ type: 'failure_rate', threshold: 0.5, windowSeconds: 600 });
    const streak = await make({ type: 'consecutive_failures', threshold: 2 });
    const dlq = await make({ type: 'dlq_added', threshold: 2, windowSeconds: 300 });

    answers.set('/flaky', 500);
    await send(wh, 2);
    await finished(apiKey, wh.id, 2);
    await evaluate();
    await evaluate();
    for (const id of [rate, streak, dlq]) expect((await dispatches(apiKey, id)).map((x) => [x.state, x.value])).toEqual([['firing', id === rate ? 1 : 2]]);

    // Successes: the streak ends and the rate falls under the threshold.
    answers.set('/flaky', 200);
    await send(wh, 3);
    await finished(apiKey, wh.id, 5);
    await evaluate();
    expect((await dispatches(apiKey, rate)).map((x) => [x.state, x.value])).toEqual([['firing', 1], ['resolved', 0.4]]);
    expect((await dispatches(apiKey, streak)).map((x) => [x.state, x.value])).toEqual([['firing', 2], ['resolved', 0]]);
    expect((await dispatches(apiKey, dlq)).map((x) => x.state)).toEqual(['firing']);
    // The failures leave the window (as time passes): dlq_added resolves.
    await app.rt.db.pool.query(`UPDATE webhook_metric_buckets SET bucket_start = bucket_start - interval '10 minutes' WHERE webhook_id = $1 AND size = 60`, [wh.id]);
    await evaluate();
    expect((await dispatches(apiKey, dlq)).map((x) => [x.state, x.value])).toEqual([['firing', 2], ['resolved', 0]]);
    expect(alertSink.received.filter((r) => r.url === '/rates')).toHaveLength(6);
  }, 40_000);
});
