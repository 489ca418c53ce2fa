// deliveryUpdated notifications are sent only for projects someone subscribes to
// (src/deliveries/listeners.ts): a subscription writes its process's row before it counts, and
// its end removes it; the sweeper removes the rows of processes that died.
import { createClient } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepPass } from './support/passes.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
let listener: pg.Client;
/** Every delivery notification on the database's channel, from any process. */
const heard: { t: string; p?: { id: string; status: string } }[] = [];
beforeAll(async () => {
  app = await startTestApp({ worker: true });
  listener = new pg.Client({ connectionString: app.databaseUrl });
  await listener.connect();
  listener.on('notification', (n) => {
    const m = JSON.parse(n.payload ?? '{}');
    if (typeof m.t === 'string' && m.t.startsWith('delivery:')) heard.push(m);
  });
  await listener.query('LISTEN app_events');
});
afterAll(async () => {
  await listener?.end();
  await app?.stop();
});

const rows = async (projectId: string) =>
  (await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM delivery_listeners WHERE project_id = $1 AND expires_at > now()`, [projectId])).rows[0].n as number;

describe('deliveryUpdated listeners', () => {
  it('claims and results notify a project only while it has a subscriber', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const statuses = (deliveryId: string) => heard.filter((m) => m.p?.id === deliveryId).map((m) => m.p!.status);

    // Nobody listens: delivered without a notification.
    const quiet = await enqueueFixtureEvent(app.rt, wh, '{"n":1}');
    await waitFor(() => receiver.received.length === 1 || null, 10_000);
    await waitFor(async () => (await app.rt.db.pool.query(`SELECT status FROM deliveries WHERE id = $1`, [quiet.deliveryId])).rows[0].status === 'succeeded' || null, 10_000);

    // A subscriber: its process's row is written, and the claim and the result notify.
    const seen: { id: string; status: string }[] = [];
    const client = createClient({ url: app.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
    client.subscribe(
      { query: `subscription { deliveryUpdated { id status } }` },
      { next: (v) => seen.push((v.data as any).deliveryUpdated), error: () => {}, complete: () => {} },
    );
    await waitFor(async () => (await rows(projectId)) === 1 || null, 10_000);
    const watched = await enqueueFixtureEvent(app.rt, wh, '{"n":2}');
    await waitFor(() => seen.some((d) => d.id === watched.deliveryId && d.status === 'succeeded') || null, 10_000);
    expect(seen.filter((d) => d.id === watched.deliveryId).map((d) => d.status)).toEqual(['delivering', 'succeeded']);
    // The subscriber heard the result's notification on the service's connection; the test's own
    // listener hears it by the end of its next round trip (the result had committed before it).
    await listener.query('SELECT 1');
    expect(statuses(watched.deliveryId)).toEqual(['delivering', 'succeeded']);

    // It ends: the row goes, and so do the notifications.
    await client.dispose();
    await waitFor(async () => (await rows(projectId)) === 0 || null, 10_000);
    const after = await enqueueFixtureEvent(app.rt, wh, '{"n":3}');
    await waitFor(async () => (await app.rt.db.pool.query(`SELECT status FROM deliveries WHERE id = $1`, [after.deliveryId])).rows[0].status === 'succeeded' || null, 10_000);
    // A notification sent with the result would have reached the listener by now: it is read after this round trip.
    await listener.query('SELECT 1');
    expect(statuses(quiet.deliveryId)).toEqual([]);
    expect(statuses(after.deliveryId)).toEqual([]);
    expect(receiver.received).toHaveLength(3);
    await receiver.close();
  });

  it('a one-at-a-time claim (strict FIFO) notifies a subscriber the same way, from the updated row', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { deliveryMode: 'strict_fifo' });
    const seen: { id: string; status: string; attempts: number }[] = [];
    const client = createClient({ url: app.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
    client.subscribe(
      { query: `subscription { deliveryUpdated { id status attempts } }` },
      { next: (v) => seen.push((v.data as any).deliveryUpdated), error: () => {}, complete: () => {} },
    );
    await waitFor(async () => (await rows(projectId)) === 1 || null, 10_000);
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh, '{"fifo":1}');
    await waitFor(() => seen.some((d) => d.id === deliveryId && d.status === 'succeeded') || null, 10_000);
    expect(seen.filter((d) => d.id === deliveryId)).toEqual([
      { id: deliveryId, status: 'delivering', attempts: 1 },
      { id: deliveryId, status: 'succeeded', attempts: 1 },
    ]);
    await client.dispose();
    await receiver.close();
  });

  it('two subscriptions of one project in one process share a row, kept until the last ends; the sweeper removes the rows of dead processes', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const open = () => {
      const c = createClient({ url: app.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
      c.subscribe({ query: `subscription { deliveryUpdated { id } }` }, { next: () => {}, error: () => {}, complete: () => {} });
      return c;
    };
    const a = open();
    const b = open();
    await waitFor(async () => (await rows(projectId)) === 1 || null, 10_000);
    await a.dispose();
    // b still subscribes: the row stays (a removal would show within this wait).
    await new Promise((r) => setTimeout(r, 300));
    expect(await rows(projectId)).toBe(1);
    await b.dispose();
    await waitFor(async () => (await rows(projectId)) === 0 || null, 10_000);

    await app.rt.db.pool.query(`INSERT INTO delivery_listeners (project_id, process_id, expires_at) VALUES ($1, 'prc_dead', now() - interval '2 minutes')`, [projectId]);
    await sweepPass(app.rt);
    expect((await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM delivery_listeners WHERE process_id = 'prc_dead'`)).rows[0].n).toBe(0);
  });
});
