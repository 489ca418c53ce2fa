import type pg from 'pg';
import { newId } from '../ids.ts';
import { isGoneLocalHolder, LEASE_HOLDER, LOCAL_HOLDERS_LIKE } from './lease-holder.ts';

/**
 * A block of one webhook's maxInFlight slots, held by one runner's drain (webhook_slot_leases).
 *
 * The drain passes its slots from attempt to attempt in memory: a slot is free the moment a
 * receiver answers, and neither a claim nor a result updates a row that every delivery of the
 * webhook shares. Leases are granted under the webhook's row lock, so live leases plus the
 * one-at-a-time claims' `webhooks.in_flight` never exceed `max_in_flight` across runners.
 *
 * A lease lives `ttlMs` past its last renewal. The holder starts an attempt only while the lease
 * outlives that attempt's timeout (`canStart`), so when a lease runs out (its runner died or lost
 * the database) none of its requests can still be open, and its slots may go to another runner.
 * A lease names its holder process (lease-holder.ts): once that process has exited, a runner that
 * sees it (same boot and pid namespace) gives the lease up at once (sweep.ts), as none of its
 * requests is open either.
 */
export interface SlotLease {
  id: string;
  webhookId: string;
  slots: number;
  /** Local clock: the lease is ours until then (measured from before the statement that granted or renewed it). */
  validUntil: number;
}

/** How long a lease outlives its last renewal beyond the webhook's timeout. */
const LEASE_MARGIN_MS = 10_000;
/** How often a running drain renews its lease. */
export const LEASE_RENEW_MS = 2_000;

export const leaseTtlMs = (timeoutMs: number) => timeoutMs + LEASE_MARGIN_MS;

/** SQL: the slots of a webhook's live leases (`webhookSql` names the webhook id). */
export const leasedSlotsSql = (webhookSql: string) =>
  `(SELECT COALESCE(sum(l.slots), 0)::int FROM webhook_slot_leases l WHERE l.webhook_id = ${webhookSql} AND l.expires_at > now())`;

export type LeaseGrant =
  | { kind: 'lease'; lease: SlotLease }
  /** Strict FIFO or throttled: its deliveries are claimed one at a time, with the webhook's in_flight. */
  | { kind: 'single' }
  /** Every slot is leased (or taken by one-at-a-time attempts) now. */
  | { kind: 'busy' }
  /** No such webhook, or it is not active. */
  | { kind: 'none' };

/**
 * Grants up to `want` free slots of the webhook to a new lease under the webhook's row lock
 * (FOR NO KEY UPDATE: ingest's foreign-key locks do not wait for it), and
 * clears the webhook's expired leases. Only active parallel webhooks without throttling are
 * drained under leases.
 */
export async function acquireSlotLease(db: pg.Pool, webhookId: string, want: number): Promise<LeaseGrant> {
  const id = newId('lse');
  const asked = Date.now();
  // Two statements in one transaction: the second takes its snapshot after the row lock is
  // ours, so it sees every lease granted (and committed) by whoever held the lock before. In one
  // statement the sum of live leases would be read from a snapshot taken before waiting for the
  // lock, and two runners granting at once would each hand out every free slot.
  const client = await db.connect();
  let row: { status: string; batchable: boolean; timeout_ms: number; slots: number | null } | undefined;
  try {
    await client.query('BEGIN');
    const { rows: locked } = await client.query({ name: 'lock_webhook_for_lease', text: 'SELECT 1 FROM webhooks WHERE id = $1 FOR NO KEY UPDATE', values: [webhookId] });
    if (locked.length > 0) {
      const { rows } = await client.query({
        name: 'acquire_slot_lease',
        text: `WITH w AS (
                 SELECT id, project_id, status, max_in_flight, in_flight, timeout_ms,
                        (status = 'active' AND delivery_mode = 'parallel' AND throttle_rate_per_second IS NULL) AS batchable
                   FROM webhooks WHERE id = $1
               ), expired AS (
                 DELETE FROM webhook_slot_leases WHERE webhook_id = $1 AND expires_at <= now()
               ), free AS (
                 SELECT w.*, LEAST($3::int, w.max_in_flight - w.in_flight - ${leasedSlotsSql('w.id')}) AS n FROM w
               ), ins AS (
                 INSERT INTO webhook_slot_leases (id, project_id, webhook_id, slots, expires_at, holder)
                 SELECT $2, project_id, id, n, now() + make_interval(secs => (timeout_ms + $4::int)::float8 / 1000), $5 FROM free WHERE batchable AND n > 0
                 RETURNING slots
               )
               SELECT free.status, free.batchable, free.timeout_ms, (SELECT slots FROM ins) AS slots FROM free`,
        values: [webhookId, id, want, LEASE_MARGIN_MS, LEASE_HOLDER],
      });
      row = rows[0];
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
  if (!row || row.status !== 'active') return { kind: 'none' };
  if (!row.batchable) return { kind: 'single' };
  if (!row.slots) return { kind: 'busy' };
  return { kind: 'lease', lease: { id, webhookId, slots: row.slots, validUntil: asked + leaseTtlMs(row.timeout_ms) } };
}

/**
 * Extends a live lease by its time to live, while its webhook is active; trims it to what the
 * webhook's maxInFlight leaves beside its other live leases and one-at-a-time attempts, should
 * that have been lowered. Answers the slots it keeps, or 0 when the lease had run out or the
 * webhook is no longer active (paused, archived: start nothing more under it; its slots may be
 * another runner's now).
 */
export async function renewSlotLease(db: pg.Pool | pg.PoolClient, lease: SlotLease): Promise<number> {
  const asked = Date.now();
  const { rows } = await db.query({
    name: 'renew_slot_lease',
    text: `UPDATE webhook_slot_leases l
              SET slots = GREATEST(LEAST(l.slots, w.max_in_flight - w.in_flight - (
                    SELECT COALESCE(sum(o.slots), 0)::int FROM webhook_slot_leases o WHERE o.webhook_id = l.webhook_id AND o.id <> l.id AND o.expires_at > now())), 0),
                  expires_at = now() + make_interval(secs => (w.timeout_ms + $2::int)::float8 / 1000)
             FROM webhooks w
            WHERE l.id = $1 AND w.id = l.webhook_id AND l.expires_at > now() AND w.status = 'active'
           RETURNING l.slots, w.timeout_ms`,
    values: [lease.id, LEASE_MARGIN_MS],
  });
  const row = rows[0];
  if (!row || row.slots === 0) {
    lease.slots = 0;
    lease.validUntil = 0;
    return 0;
  }
  lease.slots = row.slots;
  lease.validUntil = asked + leaseTtlMs(row.timeout_ms);
  return row.slots;
}

/**
 * Gives back the slots of a lease beyond `keep` (its drain has stopped claiming and only `keep`
 * attempts are still open): a new drain may have them while the slowest of those answers.
 */
export async function shrinkSlotLease(db: pg.Pool | pg.PoolClient, lease: SlotLease, keep: number): Promise<void> {
  await db.query({ name: 'shrink_slot_lease', text: 'UPDATE webhook_slot_leases SET slots = LEAST(slots, $2) WHERE id = $1', values: [lease.id, keep] });
}

/**
 * Gives a lease's slots back (its drain ended, every attempt it started answered). When the
 * database cannot be reached, it keeps trying in the background until it can or the lease has run
 * out by itself: a lease left behind would keep the webhook's slots from every other drain until
 * it expired (its time to live is the webhook's timeout plus 10 s).
 */
export async function releaseSlotLease(db: pg.Pool | pg.PoolClient, lease: SlotLease): Promise<void> {
  const release = () => db.query({ name: 'release_slot_lease', text: 'DELETE FROM webhook_slot_leases WHERE id = $1', values: [lease.id] });
  try {
    await release();
  } catch (err) {
    const until = lease.validUntil;
    const retry = (delay: number) => {
      if (Date.now() > until) return;
      const timer = setTimeout(() => void release().catch(() => retry(Math.min(delay * 2, 2_000))), delay);
      timer.unref();
    };
    retry(100);
    throw err;
  }
}

/**
 * Gives up the live leases whose holder was a process of this machine that has exited (killed, or
 * stopped while the database went away first: Ctrl-C on `npm start` reaches the embedded
 * PostgreSQL too), with the claims of the deliveries it had started under them: the kernel closed
 * that process's requests (HTTP, cloud SDK calls), so its slots are free and those deliveries
 * lost their attempt. Their claims end now (lease_until), so a claim or the sweeper takes them up
 * as any lost attempt, without waiting twice the timeout. Answers how many leases were given up.
 */
export async function releaseGoneHoldersLeases(db: pg.Pool | pg.PoolClient): Promise<number> {
  if (!LOCAL_HOLDERS_LIKE) return 0;
  const { rows } = await db.query({
    name: 'local_slot_lease_holders',
    text: `SELECT id, holder FROM webhook_slot_leases WHERE holder LIKE $1 AND expires_at > now()`,
    values: [LOCAL_HOLDERS_LIKE],
  });
  const gone = rows.filter((r) => isGoneLocalHolder(r.holder)).map((r) => r.id as string);
  if (gone.length === 0) return 0;
  const { rows: released } = await db.query({
    name: 'release_gone_holders_leases',
    // Not a lease with a `cli` attempt under it: that hand-off may still be running in its `relay
    // listen` session, which the holder's exit did not end; it runs out as before.
    text: `WITH gone AS (
             DELETE FROM webhook_slot_leases l WHERE l.id = ANY($1::text[]) AND NOT EXISTS (
               SELECT 1 FROM deliveries d WHERE d.webhook_id = l.webhook_id AND d.status = 'delivering' AND d.slot_lease = l.id AND d.destination->>'type' = 'cli')
             RETURNING l.id, l.webhook_id
           ), lost AS (
             UPDATE deliveries d SET lease_until = now()
               FROM gone WHERE d.webhook_id = gone.webhook_id AND d.status = 'delivering' AND d.slot_lease = gone.id AND d.lease_until > now()
           )
           SELECT count(*)::int AS n FROM gone`,
    values: [gone],
  });
  return released[0]?.n ?? 0;
}

/** Whether an attempt of `timeoutMs` started now ends (answered or aborted) while the lease is still ours. */
export function canStart(lease: SlotLease, timeoutMs: number): boolean {
  return lease.slots > 0 && Date.now() + timeoutMs + 1_000 < lease.validUntil;
}
