import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextTick } from '../src/schedules/cron.ts';
import { runTick } from '../src/schedules/tick.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

const base = (webhookId: string) => `/v1/webhooks/${webhookId}/schedules`;

async function tickJob(scheduleId: string) {
  const { rows } = await app.rt.db.pool.query(`SELECT run_at, payload FROM graphile_worker._private_jobs WHERE key = $1`, [`sch:${scheduleId}`]);
  return rows[0] as { run_at: Date; payload: { scheduleId: string; at: string } } | undefined;
}

async function eventsOf(scheduleId: string) {
  const { rows } = await app.rt.db.pool.query(`SELECT id, channel, headers, body FROM events WHERE headers->>'x-schedule-id' = $1 ORDER BY id`, [scheduleId]);
  return rows as { id: string; channel: string; headers: Record<string, string>; body: Buffer }[];
}

/** Makes the schedule's planned tick `ago` ms in the past, as if no runner had run since. */
async function missTicks(scheduleId: string, ago: number) {
  const at = new Date(Math.floor((Date.now() - ago) / 1000) * 1000);
  await app.rt.db.pool.query(`UPDATE schedules SET next_run_at = $2 WHERE id = $1`, [scheduleId, at]);
  await app.rt.db.pool.query(`SELECT graphile_worker.add_job('schedules__tick', json_build_object('scheduleId', $1::text, 'at', $2::text), run_at := $3, job_key := $4)`, [
    scheduleId,
    at.toISOString(),
    at,
    `sch:${scheduleId}`,
  ]);
  return at;
}

describe('schedules: routes', () => {
  it('create, list, get, patch (re-plans at once), trigger, delete', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const created = await app.api(apiKey, 'POST', base(wh.id), { name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { job: 'report' }, headers: { 'X-Kind': 'report' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s = created.body;
    expect(s).toMatchObject({ webhookId: wh.id, name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { job: 'report' }, contentType: 'application/json', headers: { 'X-Kind': 'report' }, enabled: true, lastRunAt: null, lastEventId: null });
    expect(s.id).toMatch(/^sch_/);
    expect(s.nextRunAt).toBe(nextTick('0 3 * * *', 'Europe/Berlin', new Date(s.createdAt))!.toISOString());
    expect(new Date((await tickJob(s.id))!.run_at).toISOString()).toBe(s.nextRunAt);
    for (const k of ['createdAt', 'updatedAt']) expect(typeof s[k]).toBe('string');

    const defaults = await app.api(apiKey, 'POST', base(wh.id), { cron: '*/5 * * * *' });
    expect(defaults.body).toMatchObject({ name: '', timezone: 'UTC', payload: {}, contentType: 'application/json', headers: {}, enabled: true });

    const page1 = await app.api(apiKey, 'GET', `${base(wh.id)}?limit=1`);
    expect(page1.status).toBe(200);
    expect(page1.body.items.map((x: any) => x.id)).toEqual([s.id]);
    const page2 = await app.api(apiKey, 'GET', `${base(wh.id)}?limit=1&cursor=${page1.body.nextCursor}`);
    expect(page2.body.items.map((x: any) => x.id)).toEqual([defaults.body.id]);
    expect(page2.body.nextCursor ?? null).toBeNull();
    expect((await app.api(apiKey, 'GET', `${base(wh.id)}?limit=x`)).status).toBe(400);
    expect((await app.api(apiKey, 'GET', `${base(wh.id)}?cursor=nope`)).status).toBe(400);

    expect((await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`)).body).toMatchObject({ id: s.id, cron: '0 3 * * *' });

    // Editing the expression or the zone re-plans the next tick (row and job) at once.
    const patched = await app.api(apiKey, 'PATCH', `${base(wh.id)}/${s.id}`, { cron: '*/10 * * * * *', timezone: 'America/New_York' });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ cron: '*/10 * * * * *', timezone: 'America/New_York', name: 'nightly' });
    const next = new Date(patched.body.nextRunAt);
    expect(next.getTime() - Date.now()).toBeLessThanOrEqual(10_000);
    expect(next.getUTCSeconds() % 10).toBe(0);
    const job = (await tickJob(s.id))!;
    expect(new Date(job.run_at).toISOString()).toBe(patched.body.nextRunAt);
    expect(job.payload.at).toBe(patched.body.nextRunAt);
    // Disabled: no tick planned.
    const off = await app.api(apiKey, 'PATCH', `${base(wh.id)}/${s.id}`, { enabled: false });
    expect(off.body).toMatchObject({ enabled: false, nextRunAt: null });
    expect(await tickJob(s.id)).toBeUndefined();

    // Trigger: one tick now, through ingest (channel cron, x-schedule-id in the headers).
    const fired = await app.api(apiKey, 'POST', `${base(wh.id)}/${s.id}/trigger`);
    expect(fired.status, JSON.stringify(fired.body)).toBe(202);
    expect(fired.body).toMatchObject({ status: 'queued' });
    expect(fired.body.eventId).toMatch(/^evt_/);
    const [event] = await eventsOf(s.id);
    expect(event).toMatchObject({ id: fired.body.eventId, channel: 'cron' });
    expect(event.headers).toMatchObject({ 'x-schedule-id': s.id, 'x-kind': 'report', 'content-type': 'application/json' });
    expect(JSON.parse(event.body.toString())).toEqual({ job: 'report' });
    const after = await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`);
    expect(after.body.lastEventId).toBe(fired.body.eventId);
    expect(after.body.lastRunAt).not.toBeNull();

    // GraphQL: the webhook's Relay connection.
    const gql = await app.api(apiKey, 'POST', '/graphql', { query: `query($id: ID!) { webhook(id: $id) { schedulesConnection(first: 5) { edges { node { id cron } } } } }`, variables: { id: wh.id } });
    expect(gql.body.data.webhook.schedulesConnection.edges.map((e: any) => e.node.id)).toEqual([s.id, defaults.body.id]);

    const del = await app.api(apiKey, 'DELETE', `${base(wh.id)}/${defaults.body.id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ id: defaults.body.id, deleted: true });
    expect(await tickJob(defaults.body.id)).toBeUndefined();
    expect((await app.api(apiKey, 'GET', `${base(wh.id)}/${defaults.body.id}`)).status).toBe(404);
    // Another project's key sees nothing.
    const other = await app.project('starter');
    expect((await app.api(other.apiKey, 'GET', `${base(wh.id)}/${s.id}`)).status).toBe(404);
  });

  it('answers 400 with param for an invalid cron, zone or interval; 403 on Free after 404', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const bad = async (body: Record<string, unknown>, param: string) => {
      const res = await app.api(apiKey, 'POST', base(wh.id), body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    };
    await bad({}, 'cron');
    await bad({ cron: 'every day' }, 'cron');
    await bad({ cron: '61 * * * *' }, 'cron');
    await bad({ cron: '* * * * * * *' }, 'cron');
    await bad({ cron: '*/0 * * * *' }, 'cron'); // an interval of zero
    await bad({ cron: '0 0 30 2 *' }, 'cron'); // never fires
    await bad({ cron: '* * * * *', timezone: 'Mars/Olympus' }, 'timezone');
    await bad({ cron: '* * * * *', timezone: 42 }, 'timezone');
    await bad({ cron: '* * * * *', headers: { 'bad name': 'x' } }, 'headers.bad name');
    await bad({ cron: '* * * * *', enabled: 'yes' }, 'enabled');
    const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * *' })).body;
    const patch = await app.api(apiKey, 'PATCH', `${base(wh.id)}/${s.id}`, { timezone: 'Nowhere/Else' });
    expect(patch.body.error).toMatchObject({ code: 'invalid_request', param: 'timezone' });

    const free = await app.project('free');
    const fwh = await createWebhook(app, free.apiKey);
    expect((await app.api(free.apiKey, 'POST', base('wh_unknown'), { cron: 'nonsense' })).status).toBe(404);
    for (const [method, path] of [['POST', base(fwh.id)], ['GET', base(fwh.id)]] as const) {
      const res = await app.api(free.apiKey, method, path, method === 'GET' ? undefined : { cron: 'nonsense' });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'recurring_schedules', requiredTier: 'starter' });
    }
  });
});

describe('schedules: croner next runs across daylight saving', () => {
  it('a local time skipped by spring-forward fires after the jump; one repeated by fall-back fires once', () => {
    // Europe/Berlin: 2026-03-29 02:00 → 03:00; 2026-10-25 03:00 → 02:00.
    expect(nextTick('30 2 * * *', 'Europe/Berlin', new Date('2026-03-28T12:00:00Z'))!.toISOString()).toBe('2026-03-29T01:30:00.000Z'); // 03:30 CEST
    expect(nextTick('30 2 * * *', 'Europe/Berlin', new Date('2026-03-29T01:30:00Z'))!.toISOString()).toBe('2026-03-30T00:30:00.000Z');
    const fallDay = [new Date('2026-10-24T12:00:00Z')];
    for (let i = 0; i < 3; i++) fallDay.push(nextTick('30 2 * * *', 'Europe/Berlin', fallDay[fallDay.length - 1])!);
    const onFallDay = fallDay.slice(1).filter((d) => d.toISOString().startsWith('2026-10-25'));
    expect(onFallDay).toHaveLength(1);
    // An hourly schedule keeps firing hourly in UTC across the New York spring-forward (2026-03-08 02:00 → 03:00).
    let t = new Date('2026-03-08T05:30:00Z');
    const hours: string[] = [];
    for (let i = 0; i < 3; i++) hours.push((t = nextTick('0 * * * *', 'America/New_York', t)!).toISOString());
    expect(hours).toEqual(['2026-03-08T06:00:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T08:00:00.000Z']);
    // Six fields: seconds first, at most one tick a second.
    expect(nextTick('*/15 * * * * *', 'UTC', new Date('2026-01-01T00:00:00.500Z'))!.toISOString()).toBe('2026-01-01T00:00:15.000Z');
  });
});

describe('schedules: ticks', () => {
  it('a paused webhook skips the tick and counts it; an archived one too; the plan goes on', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * *' })).body;
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`);
    const at = await missTicks(s.id, 5_000);
    expect(await runTick(app.rt, s.id, at.toISOString())).toMatchObject({ status: 'skipped', code: 'webhook_paused' });
    // The same job again (a runner that died before completing it) is stale: nothing twice.
    expect(await runTick(app.rt, s.id, at.toISOString())).toEqual({ status: 'stale' });
    let row = (await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`)).body;
    expect(row).toMatchObject({ lastStatus: 'skipped', skippedCount: 1, lastEventId: null });
    expect(row.lastRunAt).not.toBeNull();
    expect(new Date(row.nextRunAt).getTime()).toBeGreaterThan(Date.now());
    expect(new Date((await tickJob(s.id))!.run_at).toISOString()).toBe(row.nextRunAt);
    expect(await eventsOf(s.id)).toHaveLength(0);
    const paused = await app.api(apiKey, 'POST', `${base(wh.id)}/${s.id}/trigger`);
    expect(paused.status).toBe(409);
    expect(paused.body.error.code).toBe('webhook_paused');

    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/archive`);
    const at2 = await missTicks(s.id, 5_000);
    expect(await runTick(app.rt, s.id, at2.toISOString())).toMatchObject({ status: 'skipped' });
    row = (await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`)).body;
    expect(row.skippedCount).toBe(2);

    // Active again: the tick fires, lastEventId is its event.
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/restore`);
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`);
    const at3 = await missTicks(s.id, 5_000);
    const fired = await runTick(app.rt, s.id, at3.toISOString());
    expect(fired.status).toBe('fired');
    row = (await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`)).body;
    expect(row).toMatchObject({ lastStatus: 'fired', lastEventId: (fired as { eventId: string }).eventId, skippedCount: 2 });
    const [event] = await eventsOf(s.id);
    expect(event.headers['x-schedule-tick']).toBe(at3.toISOString());
  });

  it("a destroyed webhook's schedules are gone with it; their waiting job finds nothing to fire", async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * *' })).body;
    await app.rt.db.pool.query(`INSERT INTO retention_cursors (project_id, webhook_id, kind, last_id) SELECT project_id, id, 'payload', 'evt_0' FROM webhooks WHERE id = $1`, [wh.id]);
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/archive`);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destroy`)).status).toBe(200);
    expect(await app.rt.db.pool.query(`SELECT 1 FROM schedules WHERE id = $1`, [s.id]).then((r) => r.rows)).toHaveLength(0);
    expect(await app.rt.db.pool.query(`SELECT 1 FROM retention_cursors WHERE webhook_id = $1`, [wh.id]).then((r) => r.rows)).toHaveLength(0);
    expect(await runTick(app.rt, s.id, s.nextRunAt)).toEqual({ status: 'stale' });
  });

  it('ticks do not count toward the ingest rate (the other quotas apply)', async () => {
    const { apiKey, projectId } = await app.project('starter'); // 10 req/s
    const wh = await createWebhook(app, apiKey);
    const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '0 0 1 1 *' })).body;
    const answers = await Promise.all(Array.from({ length: 15 }, () => app.api(apiKey, 'POST', `${base(wh.id)}/${s.id}/trigger`)));
    expect(answers.map((a) => a.status)).toEqual(Array(15).fill(202));
    expect(await eventsOf(s.id)).toHaveLength(15);
    expect(await app.rt.db.pool.query(`SELECT 1 FROM rate_limit_windows WHERE key IN ($1, $2)`, [`ingest:p:${projectId}`, `ingest:w:${wh.id}`]).then((r) => r.rows)).toHaveLength(0);
  });

  it('ticks missed while no runner ran fire once on recovery, never a burst', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * * *' })).body;
    // An hour of every-second ticks missed (3,600), then a runner starts.
    await missTicks(s.id, 3_600_000);
    const runnerStarted = Date.now();
    const worker = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const first = await waitFor(async () => {
        const e = await eventsOf(s.id);
        return e.length >= 1 ? e : null;
      }, 15_000);
      const row = (await app.api(apiKey, 'GET', `${base(wh.id)}/${s.id}`)).body;
      expect(row.lastEventId).toBe(first![0].id);
      // A moment later: the catch-up tick, then only regular ticks (of seconds since the runner
      // started, about one a second), none of the 3,600 missed.
      await new Promise((r) => setTimeout(r, 1_500));
      const events = await eventsOf(s.id);
      const tickOf = (e: (typeof events)[number]) => new Date(e.headers['x-schedule-tick']).getTime();
      const missed = events.filter((e) => tickOf(e) < runnerStarted - 1_000);
      expect(missed).toHaveLength(1);
      expect(missed[0].id).toBe(events[0].id);
      expect(runnerStarted - tickOf(events[0])).toBeGreaterThan(3_500_000);
      const ticks = events.slice(1).map(tickOf);
      expect(new Set(ticks).size).toBe(ticks.length);
    } finally {
      await app.api(apiKey, 'PATCH', `${base(wh.id)}/${s.id}`, { enabled: false });
      await worker.stop();
    }
  });

  it('many ticks at once on a runner whose pool is smaller than its concurrency: none waits for a second connection', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const worker = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true, config: { DATABASE_POOL_SIZE: 2, WORKER_CONCURRENCY: 8 } });
    const ids: string[] = [];
    try {
      for (let i = 0; i < 12; i++) ids.push((await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * * *' })).body.id);
      // Ticks holding a connection while waiting for a second one would deadlock the runner's
      // two: then no schedule (or only some) would fire.
      const fired = async () =>
        (await app.rt.db.pool.query(`SELECT DISTINCT headers->>'x-schedule-id' AS id FROM events WHERE webhook_id = $1`, [wh.id])).rows.map((r) => r.id as string);
      await waitFor(async () => (await fired()).length === ids.length, 15_000).catch(() => {});
      expect((await fired()).sort()).toEqual([...ids].sort());
    } finally {
      for (const id of ids) await app.api(apiKey, 'PATCH', `${base(wh.id)}/${id}`, { enabled: false });
      await worker.stop();
    }
  }, 60_000);

  it('a six-field every-second schedule fires each tick once and delivers it once, with two runners running', async () => {
    const receiver = await startReceiver();
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey, { url: `${receiver.url}/tick` });
    const a = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    const b = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const s = (await app.api(apiKey, 'POST', base(wh.id), { cron: '* * * * * *', payload: 'ping', contentType: 'text/plain' })).body;
      await waitFor(async () => (await eventsOf(s.id)).length >= 4, 20_000, 100);
      const off = await app.api(apiKey, 'PATCH', `${base(wh.id)}/${s.id}`, { enabled: false });
      expect(off.body.nextRunAt).toBeNull();
      const events = await eventsOf(s.id);
      const ticks = events.map((e) => e.headers['x-schedule-tick']);
      expect(new Set(ticks).size).toBe(ticks.length); // no tick twice
      // Whole seconds (that none is skipped needs runners on time: schedules.timing.test.ts).
      expect(ticks.every((t) => Date.parse(t) % 1000 === 0)).toBe(true);
      expect(events.every((e) => e.body.toString() === 'ping')).toBe(true);
      // Each tick's event delivered once.
      await waitFor(() => receiver.received.length >= events.length, 15_000);
      await new Promise((r) => setTimeout(r, 300));
      const ids = receiver.received.map((r) => r.headers['webhook-id']);
      expect(new Set(ids).size).toBe(ids.length);
      expect(new Set(ids)).toEqual(new Set(events.map((e) => e.id)));
      expect(receiver.received[0].headers['content-type']).toBe('text/plain');
    } finally {
      await b.stop();
      await a.stop();
      await receiver.close();
    }
  });
});
