import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

async function settled(apiKey: string, id: string) {
  return waitFor(async () => {
    const d = (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
    return ['succeeded', 'failed'].includes(d.status) ? d : null;
  }, 15_000);
}

describe('replay', () => {
  it('re-sends the dispatch snapshot byte for byte with the same webhook-id, as a new linked delivery', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('free');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh, Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0xff, 0x7d]), { contentType: 'application/octet-stream' });
    await settled(apiKey, deliveryId);
    const res = await app.api(apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ id: expect.stringMatching(/^rpl_/), kind: 'single', sourceDeliveryId: deliveryId, status: 'completed', total: 1, created: 1 });
    const replayId = res.body.filter.deliveryIds[0];
    const replay = await settled(apiKey, replayId);
    expect(replay).toMatchObject({ status: 'succeeded', replayOf: deliveryId });
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1].body.equals(receiver.received[0].body)).toBe(true);
    expect(receiver.received[1].headers['webhook-id']).toBe(receiver.received[0].headers['webhook-id']);
    expect(receiver.received[1].headers['content-type']).toBe('application/octet-stream');
    const jobs = await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/replay-jobs`);
    expect(jobs.body.items.map((j: any) => j.id)).toEqual([res.body.id]);
    await receiver.close();
  });

  it('answers 409 payload_gone when the retained payload is gone, and 404 for another project', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('free');
    const other = await app.project('free');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const { deliveryId, eventId } = await enqueueFixtureEvent(app.rt, wh);
    await settled(apiKey, deliveryId);
    expect((await app.api(other.apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`)).status).toBe(404);
    await app.rt.db.prisma.event.update({ where: { id: eventId }, data: { body: null } });
    const res = await app.api(apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('payload_gone');
    await receiver.close();
  });
});

describe('replay quota', () => {
  it('counts replays against replay_volume (429 with the quota fields and Retry-After)', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('free');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const tighten = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { replay_volume: 1 });
    expect(tighten.status).toBe(200);
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await settled(apiKey, deliveryId);
    expect((await app.api(apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`)).status).toBe(202);
    const refused = await app.api(apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'replay_volume', scope: 'webhook', limit: 1, current: 1, delta: 1 });
    expect(refused.headers.get('retry-after')).toBeTruthy();
    await receiver.close();
  });
});

describe('DLQ', () => {
  it('lists, exports (base64, 20 a page) and re-drives entries; bulk re-drive needs Starter', async () => {
    let healthy = false;
    const receiver = await startReceiver(() => (healthy ? { status: 200 } : { status: 410 }));
    const { apiKey, projectId } = await app.project('free');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }))).deliveryId);
    for (const id of ids) await settled(apiKey, id);
    const dlq = await app.api(apiKey, 'GET', `/v1/dlq?webhookId=${wh.id}&limit=2`);
    expect(dlq.body.items).toHaveLength(2);
    expect(dlq.body.nextCursor).toBeTruthy();
    const rest = await app.api(apiKey, 'GET', `/v1/dlq?webhookId=${wh.id}&limit=2&cursor=${dlq.body.nextCursor}`);
    expect(rest.body.items).toHaveLength(1);
    expect(rest.body.nextCursor).toBeNull();
    const foreign = await app.api(apiKey, 'GET', `/v1/dlq?limit=2&cursor=${dlq.body.nextCursor}`);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.code).toBe('invalid_cursor');

    const exported = await app.api(apiKey, 'GET', `/v1/dlq/export?limit=500`);
    expect(exported.body.items).toHaveLength(3);
    const row = exported.body.items.find((r: any) => r.deliveryId === ids[0]);
    expect(Buffer.from(row.payloadBase64, 'base64').toString()).toBe('{"i":0}');

    healthy = true;
    const entry = dlq.body.items[0];
    const redrive = await app.api(apiKey, 'POST', `/v1/dlq/${entry.id}/redrive`);
    expect(redrive.status).toBe(202);
    const again = await app.api(apiKey, 'POST', `/v1/dlq/${entry.id}/redrive`);
    expect(again.status).toBe(409);
    const newId = redrive.body.filter.deliveryIds[0];
    expect((await settled(apiKey, newId)).status).toBe('succeeded');
    const last = receiver.received[receiver.received.length - 1];
    expect(last.headers['webhook-id']).toBe(receiver.received.find((r) => r.body.equals(last.body))!.headers['webhook-id']);

    const bulk = await app.api(apiKey, 'POST', '/v1/dlq/redrive', { webhookId: wh.id });
    expect(bulk.status).toBe(403);
    expect(bulk.body.error).toMatchObject({ code: 'tier_required', feature: 'bulk_replay', requiredTier: 'starter' });
    await app.rt.db.prisma.project.update({ where: { id: projectId }, data: { tier: 'starter' } });
    const bulkOk = await app.api(apiKey, 'POST', '/v1/dlq/redrive', { webhookId: wh.id });
    expect(bulkOk.status).toBe(202);
    expect(bulkOk.body).toMatchObject({ kind: 'bulk_redrive', total: 2 });
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/dlq?webhookId=${wh.id}`)).body.items.length === 0, 15_000);
    const redriven = await app.api(apiKey, 'GET', `/v1/dlq?webhookId=${wh.id}&state=redriven`);
    expect(redriven.body.items).toHaveLength(3);
    await receiver.close();
  });

  it('bulk replay by filter (Starter and above)', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('starter');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueueFixtureEvent(app.rt, wh)).deliveryId);
    for (const id of ids) await settled(apiKey, id);
    const job = await app.api(apiKey, 'POST', '/v1/replay-jobs', { webhookId: wh.id, status: 'succeeded' });
    expect(job.status).toBe(202);
    expect(job.body).toMatchObject({ kind: 'bulk', total: 3 });
    // The answer shows the job as it is when read after its commit: a runner may have taken it up already.
    expect(['queued', 'running', 'completed']).toContain(job.body.status);
    await waitFor(() => receiver.received.length === 6, 15_000);
    const list = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries?limit=100`);
    expect(list.body.items.filter((d: any) => d.replayOf).length).toBe(3);
    await receiver.close();
  });
});

describe('deliveryUpdated subscription', () => {
  it('reports each state change made by a runner in another process, to its own project only', async () => {
    const api = await startTestApp({ databaseUrl: app.databaseUrl, worker: false });
    const receiver = await startReceiver();
    const { apiKey, projectId } = await api.project('free');
    const stranger = await api.project('free');
    const wh = await createFixtureWebhook(api.rt, projectId, receiver.url);
    const seen: any[] = [];
    const strangerSeen: any[] = [];
    const subscribe = (key: string, into: any[]) => {
      const client = createClient({ url: api.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${key}` } });
      client.subscribe({ query: `subscription($w: ID) { deliveryUpdated(webhookId: $w) { id status attempts } }`, variables: { w: key === apiKey ? wh.id : null } }, {
        next: (v) => into.push((v.data as any).deliveryUpdated),
        error: () => {},
        complete: () => {},
      });
      return client;
    };
    const c1 = subscribe(apiKey, seen);
    const c2 = subscribe(stranger.apiKey, strangerSeen);
    await new Promise((r) => setTimeout(r, 300));
    const { deliveryId } = await enqueueFixtureEvent(api.rt, wh);
    await waitFor(() => seen.some((d) => d.status === 'succeeded'), 15_000);
    expect(seen.filter((d) => d.id === deliveryId).map((d) => d.status)).toEqual(['delivering', 'succeeded']);
    expect(strangerSeen).toHaveLength(0);
    await c1.dispose();
    await c2.dispose();
    await receiver.close();
    await api.stop();
  });
});
