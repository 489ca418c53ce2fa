import { afterAll, beforeAll, expect, it } from 'vitest';
import { claimDeliveryBatch } from '../src/deliveries/claim-batch.ts';
import { acquireSlotLease } from '../src/deliveries/slot-lease.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';

// A drain's batch claim takes the webhook's oldest queued deliveries except those whose job a
// runner already holds (the job is about to run and names its delivery to the drain): checked by
// the job's key, whatever the size of the job table.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app?.stop();
});

it('skips the deliveries whose job a runner holds, takes the others in order, and deletes their jobs', async () => {
  const { projectId } = await app.project('pro');
  const wh = await createFixtureWebhook(app.rt, projectId, 'http://127.0.0.1:9/hook');
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }))).deliveryId);
  // Runners hold the jobs of the second and the fourth.
  const held = [ids[1], ids[3]];
  await app.rt.db.pool.query(`UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'another runner' WHERE key = ANY($1::text[])`, [held.map((id) => `del:${id}`)]);
  const grant = await acquireSlotLease(app.rt.db.pool, wh.id, 10);
  if (grant.kind !== 'lease') throw new Error(`no lease: ${grant.kind}`);
  const batch = await claimDeliveryBatch(app.rt.db.pool, wh.id, [], 10, 128, grant.lease.id);
  if (batch.kind !== 'claimed') throw new Error(`not claimed: ${batch.kind}`);
  expect(batch.claims.map((c) => c.row.id)).toEqual(ids.filter((id) => !held.includes(id)));
  expect(batch.jobsDeleted).toBe(4);
  const { rows } = await app.rt.db.pool.query(`SELECT key FROM graphile_worker._private_jobs WHERE key = ANY($1::text[]) ORDER BY key`, [ids.map((id) => `del:${id}`)]);
  expect(rows.map((r) => r.key)).toEqual(held.map((id) => `del:${id}`).sort());
  // Named by their own jobs, the held ones are claimed too.
  const named = await claimDeliveryBatch(app.rt.db.pool, wh.id, held, 10, 128, grant.lease.id);
  if (named.kind !== 'claimed') throw new Error(`not claimed: ${named.kind}`);
  expect(named.claims.map((c) => c.row.id).sort()).toEqual([...held].sort());
});
