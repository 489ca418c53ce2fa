import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { Drain } from '../src/deliveries/drain.ts';
import { claimDeliveryBatch } from '../src/deliveries/claim-batch.ts';
import { LEASE_RENEW_MS, renewSlotLease } from '../src/deliveries/slot-lease.ts';
import { isGoneLocalHolder, LEASE_HOLDER } from '../src/deliveries/lease-holder.ts';
import { spawnSync } from 'node:child_process';
import { pauseWebhook, resumeWebhook } from '../src/webhooks/lifecycle.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { sweepPass } from './support/passes.ts';
import { gate, startReceiver } from './support/receiver.ts';

// maxInFlight as slot leases (src/deliveries/slot-lease.ts): a drain leases a block of its
// webhook's slots and hands them from attempt to attempt in memory. One job runner here; the
// ordering tests cover two.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

const count = async (sql: string, params: unknown[]) => (await app.rt.db.pool.query(sql, params)).rows[0].n as number;
const succeeded = (webhookId: string) => count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [webhookId]);
const leases = (webhookId: string) => count(`SELECT count(*)::int AS n FROM webhook_slot_leases WHERE webhook_id = $1`, [webhookId]);
/** A wait that failed, with where the webhook's deliveries, jobs and leases were then (for a run whose log is all there is). */
const withState = (webhookId: string, receiver: { received: unknown[] }) => async (err: unknown) => {
  const { rows } = await app.rt.db.pool.query(
    `SELECT (SELECT json_agg(d ORDER BY d.seq) FROM (SELECT id, seq, status, attempts, lease_until, slot_lease FROM deliveries WHERE webhook_id = $1) d) AS deliveries,
            (SELECT json_agg(j) FROM (SELECT key, run_at, attempts, locked_at, last_error FROM graphile_worker._private_jobs) j) AS jobs,
            (SELECT json_agg(l) FROM webhook_slot_leases l WHERE l.webhook_id = $1) AS leases, now() AS now`,
    [webhookId],
  );
  throw new Error(`${(err as Error).message}; received ${receiver.received.length}; ${JSON.stringify(rows[0])}`);
};

describe('slot leases', () => {
  it('a drain holds one lease of the free slots while it runs, no webhook row write per delivery, and gives the lease back when it ends', async () => {
    const open = gate();
    const receiver = await startReceiver(() => ({ status: 200, until: open.opened }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 3 });
    for (let i = 0; i < 12; i++) await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }));
    // Three requests held open at the receiver: the drain's three leased slots are all in use.
    await waitFor(() => receiver.inFlight === 3 || null, 10_000);
    const { rows } = await app.rt.db.pool.query(`SELECT slots FROM webhook_slot_leases WHERE webhook_id = $1 AND expires_at > now()`, [wh.id]);
    expect(rows).toEqual([{ slots: 3 }]);
    // The one-at-a-time counter is not used by the drain.
    expect(await count(`SELECT in_flight AS n FROM webhooks WHERE id = $1`, [wh.id])).toBe(0);
    open.open();
    await waitFor(async () => (await succeeded(wh.id)) === 12 || null, 20_000);
    expect(receiver.maxInFlight).toBe(3);
    expect(receiver.received).toHaveLength(12);
    await waitFor(async () => (await leases(wh.id)) === 0 || null, 10_000);
    await receiver.close();
  });

  it("a drain's wake is never lost: one that comes while its loop is busy (in a claim) ends the loop's next wait (a delivery named while its first claim runs is claimed after it, not at the next answer)", async () => {
    const drain = new Drain();
    // Whether the loop's next wait ends before anything else could happen (setImmediate runs after every promise already settled).
    const wakesNow = () => Promise.race([drain.woken().then(() => true), new Promise<false>((r) => setImmediate(() => r(false)))]).finally(() => drain.sleep());
    expect(await wakesNow()).toBe(false);
    // A job names its delivery while the drain's first claim runs: the loop comes round for it once that claim answered.
    const joined = drain.join('del_named');
    expect(await wakesNow()).toBe(true);
    expect(await wakesNow()).toBe(false);
    // In a backlog (no room), a delivery named waits for the next batch.
    drain.roomLeft = false;
    const later = drain.join('del_later');
    expect(await wakesNow()).toBe(false);
    // An answer while the loop is busy elsewhere.
    drain.wake();
    expect(await wakesNow()).toBe(true);
    expect(await wakesNow()).toBe(false);
    drain.take().release();
    await Promise.all([joined, later]);
  });

  /**
   * A webhook (maxInFlight 2) whose both slots another runner's drain holds, and three deliveries
   * whose jobs ran and found no free slot: the webhook's hand-off job came back for later, naming
   * the first waiting delivery (the drain it starts claims the others with it), and no delivery's
   * own job is left.
   */
  const slotsHeldElsewhere = async () => {
    const receiver = await startReceiver();
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 2 });
    const other = newId('lse');
    await app.rt.db.pool.query(
      `INSERT INTO webhook_slot_leases (id, project_id, webhook_id, slots, expires_at) VALUES ($1, $2, $3, 2, now() + interval '1 hour')`,
      [other, projectId, wh.id],
    );
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }))).deliveryId);
    await waitFor(
      async () =>
        (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = $1 AND payload->>'deliveryId' = $2 AND run_at > now() - interval '1 second'`, [`hand:${wh.id}`, ids[0]])) === 1 &&
        (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ANY($1::text[])`, [ids.map((id) => `del:${id}`)])) === 0
          ? true
          : null,
      10_000,
    );
    return { receiver, wh, other, ids };
  };

  it("slots leased by another runner's drain are not used: the deliveries wait, then go out once that lease is gone", async () => {
    const { receiver, wh, other, ids } = await slotsHeldElsewhere();
    expect(receiver.received).toHaveLength(0);
    expect(await count(`SELECT count(*)::int AS n FROM deliveries WHERE id = ANY($1::text[]) AND status = 'queued'`, [ids])).toBe(3);
    await app.rt.db.pool.query(`DELETE FROM webhook_slot_leases WHERE id = $1`, [other]);
    await waitFor(async () => (await succeeded(wh.id)) === 3 || null, 10_000);
    expect(receiver.received).toHaveLength(3);
    await receiver.close();
  });

  it('a lease is named by its holder process: one of an exited process of this machine is gone, a live one or another machine\'s is not', () => {
    expect(LEASE_HOLDER).toMatch(new RegExp(`:${process.pid}:\\d+$`));
    const place = LEASE_HOLDER!.replace(/:\d+:\d+$/, '');
    const exited = spawnSync(process.execPath, ['-e', '']).pid!;
    expect(isGoneLocalHolder(LEASE_HOLDER)).toBe(false);
    expect(isGoneLocalHolder(`${place}:${exited}:1`)).toBe(true);
    // The same pid started at another time: a pid used again, not the holder.
    expect(isGoneLocalHolder(LEASE_HOLDER!.replace(/:\d+$/, ':1'))).toBe(true);
    expect(isGoneLocalHolder(`another-boot/1:${exited}:1`)).toBe(false);
    expect(isGoneLocalHolder(null)).toBe(false);
  });

  it('the sweep gives back a lease whose holder process here has exited, with the claims made under it: they go out at once; a live holder keeps its lease', async () => {
    const { receiver, wh, other, ids } = await slotsHeldElsewhere();
    // The lease's drain had claimed the first delivery (its claim would hold for twice the timeout plus 10 s).
    const claim = await claimDeliveryBatch(app.rt.db.pool, wh.id, [ids[0]], 1, 128, other);
    expect(claim.kind === 'claimed' && claim.claims.length).toBe(1);
    const setHolder = (holder: string) => app.rt.db.pool.query(`UPDATE webhook_slot_leases SET holder = $2 WHERE id = $1`, [other, holder]);
    const place = LEASE_HOLDER!.replace(/:\d+:\d+$/, '');
    for (const live of [LEASE_HOLDER!, `another-boot/1:1:1`]) {
      await setHolder(live);
      await sweepPass(app.rt);
      expect(await leases(wh.id)).toBe(1);
      expect(await count(`SELECT count(*)::int AS n FROM deliveries WHERE id = $1 AND status = 'delivering' AND lease_until > now() + interval '10 seconds'`, [ids[0]])).toBe(1);
    }
    expect(receiver.received).toHaveLength(0);
    await setHolder(`${place}:${spawnSync(process.execPath, ['-e', '']).pid}:1`);
    await sweepPass(app.rt);
    expect(await count(`SELECT count(*)::int AS n FROM webhook_slot_leases WHERE id = $1`, [other])).toBe(0);
    await waitFor(async () => (await succeeded(wh.id)) === 3 || null, 10_000);
    expect(receiver.received).toHaveLength(3);
    await receiver.close();
  });

  it("the drain holding every slot takes the delivery the waiting jobs' hand-off names: the others still have a job and go out at once", async () => {
    const { receiver, wh, other, ids } = await slotsHeldElsewhere();
    // The other runner's drain claims the first one (deleting that delivery's jobs), delivers it, and ends.
    const claim = await claimDeliveryBatch(app.rt.db.pool, wh.id, [ids[0]], 1, 128, other);
    expect(claim.kind === 'claimed' && claim.claims.map((c) => c.row.id)).toEqual([ids[0]]);
    await app.rt.db.pool.query(`UPDATE deliveries SET status = 'succeeded', slot_lease = NULL, lease_until = NULL WHERE id = $1`, [ids[0]]);
    await app.rt.db.pool.query(`DELETE FROM webhook_slot_leases WHERE id = $1`, [other]);
    // The hand-off job was not the first delivery's: it still runs, and its drain takes the other two
    // (long before the sweep's 20 seconds would find them without a job).
    await waitFor(async () => (await succeeded(wh.id)) === 3 || null, 8_000);
    expect(receiver.received).toHaveLength(2);
    await receiver.close();
  });

  it('a one-at-a-time claim counts live leases: after a switch to strict_fifo, a lease left by a drain holds the slot until it is gone', async () => {
    const receiver = await startReceiver();
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 1, deliveryMode: 'strict_fifo' });
    // A drain from before the switch (the webhook was parallel) still holds the one slot.
    const holder = newId('lse');
    await app.rt.db.pool.query(`INSERT INTO webhook_slot_leases (id, project_id, webhook_id, slots, expires_at) VALUES ($1, $2, $3, 1, now() + interval '1 hour')`, [holder, projectId, wh.id]);
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    // Its job ran, found every slot taken, and came back for later.
    await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = $1 AND attempts = 0 AND run_at > now() - interval '1 second'`, [`del:${deliveryId}`])) === 1 || null, 10_000);
    expect(receiver.received).toHaveLength(0);
    expect(await count(`SELECT in_flight AS n FROM webhooks WHERE id = $1`, [wh.id])).toBe(0);
    await app.rt.db.pool.query(`DELETE FROM webhook_slot_leases WHERE id = $1`, [holder]);
    await waitFor(async () => (await succeeded(wh.id)) === 1 || null, 10_000);
    expect(receiver.received).toHaveLength(1);
    // The one-at-a-time slot was given back with the result.
    expect(await count(`SELECT in_flight AS n FROM webhooks WHERE id = $1`, [wh.id])).toBe(0);
    await receiver.close();
  });

  /**
   * A webhook (maxInFlight 2) with `events` queued, whose first two requests the receiver holds
   * open until `open` opens; once both are open, its drain's lease runs out under it (as when its
   * renewals could not reach the database). The held requests stay open through a renewal and a
   * new drain: the webhook's timeout is 30 s (at 5 s a slow run ended them first, and their retries
   * were sent twice).
   */
  const leaseLostUnderTwoOpen = async (events: number) => {
    const open = gate();
    const receiver = await startReceiver((_r, n) => (n <= 2 ? { status: 200, until: open.opened } : { status: 200 }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 2, timeoutMs: 30_000 });
    for (let i = 0; i < events; i++) await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }));
    await waitFor(() => receiver.inFlight === 2 || null, 10_000).catch(withState(wh.id, receiver));
    await app.rt.db.pool.query(`UPDATE webhook_slot_leases SET expires_at = now() - interval '1 second' WHERE webhook_id = $1`, [wh.id]);
    return { open, receiver, wh };
  };

  it('a drain whose lease is lost starts nothing more under it; every delivery still goes out exactly once', async () => {
    const { open, receiver, wh } = await leaseLostUnderTwoOpen(8);
    // Its next renewal (every 2 s) finds it gone: the drain starts nothing more, the claimed
    // deliveries waiting for one of its slots go back to wait, and a new drain under a new lease
    // sends them while the first two requests are still open.
    await waitFor(() => receiver.received.length >= 3 || null, 15_000).catch(withState(wh.id, receiver));
    expect(receiver.inFlight).toBeGreaterThanOrEqual(2);
    open.open();
    await waitFor(async () => (await succeeded(wh.id)) === 8 || null, 20_000);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(8);
    expect(new Set(ids).size).toBe(8);
    await waitFor(async () => (await leases(wh.id)) === 0 || null, 10_000);
    await receiver.close();
  });

  it('a drain that finds its lease lost while every attempt it claimed is open hands the webhook on then: the next delivery goes out while they are still open', async () => {
    // Both slots' requests open, and nothing waits for a slot: no answer and no waiting attempt will wake the drain.
    const { open, receiver, wh } = await leaseLostUnderTwoOpen(2);
    // Its next renewal finds the lease gone (time is the mechanism here: a renewal every LEASE_RENEW_MS;
    // should it come later in a slow run, the drain would still claim the next delivery and this test pass anyway).
    await new Promise((r) => setTimeout(r, LEASE_RENEW_MS + 1_000));
    await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i: 2 }));
    await waitFor(() => receiver.received.length >= 3 || null, 10_000).catch(withState(wh.id, receiver));
    // The first two still open (the third may still be counted while its answer goes out).
    expect(receiver.inFlight).toBeGreaterThanOrEqual(2);
    open.open();
    await waitFor(async () => (await succeeded(wh.id)) === 3 || null, 20_000);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(3);
    await waitFor(async () => (await leases(wh.id)) === 0 || null, 10_000);
    await receiver.close();
  });

  it('pausing stops the deliveries a drain claimed ahead: none starts once the pause has answered, and each goes out once after resume', async () => {
    const open = gate();
    const receiver = await startReceiver(() => ({ status: 200, until: open.opened }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 3, timeoutMs: 30_000 });
    for (let i = 0; i < 15; i++) await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }));
    // Three requests open; the drain holds more deliveries claimed, waiting for those slots.
    await waitFor(() => receiver.inFlight === 3 || null, 10_000);
    await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'delivering'`, [wh.id])) > 3 || null, 10_000);
    await pauseWebhook(app.rt, projectId, wh.id);
    // The three open requests are answered; the slots they free must not go to the claimed ones.
    open.open();
    // The drain ends (its lease given back) with nothing delivering.
    await waitFor(async () => (await leases(wh.id)) === 0 || null, 15_000);
    await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'delivering'`, [wh.id])) === 0 || null, 15_000);
    expect(receiver.received).toHaveLength(3);
    expect(await succeeded(wh.id)).toBe(3);
    await resumeWebhook(app.rt, projectId, wh.id);
    await waitFor(async () => (await succeeded(wh.id)) === 15 || null, 20_000);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(15);
    expect(new Set(ids).size).toBe(15);
    await receiver.close();
  });

  it('a slow answer does not hold the webhook back when the drain hands on: the next drain delivers while it is still open', async () => {
    const slow = gate();
    const receiver = await startReceiver((_r, n) => (n === 1 ? { status: 200, until: slow.opened } : { status: 200 }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 3, timeoutMs: 25_000 });
    const first = await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i: 0 }));
    // Once on a CI run the first request had not come after 10 s.
    await waitFor(() => receiver.inFlight === 1 || null, 10_000).catch(withState(wh.id, receiver));
    // Events keep coming while the first request stays open, past the drain's 5 s budget.
    const startedAt = Date.now();
    let late: string | null = null;
    const sent = new Map<string, number>();
    try {
      for (let i = 1; i < 400 && !late; i++) {
        const { deliveryId } = await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }));
        sent.set(deliveryId, Date.now() - startedAt);
        await new Promise((r) => setTimeout(r, 50));
        // An event sent more than 6 s after the slow request opened, delivered while it is still open.
        const done = (await app.rt.db.pool.query(`SELECT id FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [wh.id])).rows.map((r) => r.id as string);
        late = done.find((id) => (sent.get(id) ?? 0) > 6_000) ?? null;
      }
      expect(late, 'no event sent after the first drain handed on was delivered while its slow request was open').not.toBeNull();
      expect(receiver.inFlight).toBe(1);
      expect(await count(`SELECT count(*)::int AS n FROM deliveries WHERE id = $1 AND status = 'delivering'`, [first.deliveryId])).toBe(1);
    } finally {
      slow.open();
    }
    await waitFor(async () => (await succeeded(wh.id)) === sent.size + 1 || null, 20_000);
    expect(receiver.maxInFlight).toBeLessThanOrEqual(3);
    await receiver.close();
  }, 60_000);

  it("a lowered maxInFlight trims a lease at its renewal to what the webhook's other live leases leave, and a paused webhook's lease is not renewed", async () => {
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, 'http://127.0.0.1:9/never', { maxInFlight: 6 });
    const lease = async (slots: number) => {
      const id = newId('lse');
      await app.rt.db.pool.query(`INSERT INTO webhook_slot_leases (id, project_id, webhook_id, slots, expires_at) VALUES ($1, $2, $3, $4, now() + interval '1 minute')`, [id, projectId, wh.id, slots]);
      return { id, webhookId: wh.id, slots, validUntil: Date.now() + 60_000 };
    };
    const a = await lease(3);
    const b = await lease(3);
    await app.rt.db.pool.query(`UPDATE webhooks SET max_in_flight = 4 WHERE id = $1`, [wh.id]);
    expect(await renewSlotLease(app.rt.db.pool, a)).toBe(1);
    expect(await renewSlotLease(app.rt.db.pool, b)).toBe(3);
    expect(await count(`SELECT sum(slots)::int AS n FROM webhook_slot_leases WHERE webhook_id = $1`, [wh.id])).toBe(4);
    await pauseWebhook(app.rt, projectId, wh.id);
    expect(await renewSlotLease(app.rt.db.pool, b)).toBe(0);
    expect(b.validUntil).toBe(0);
  });
});
