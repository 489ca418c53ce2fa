import type pg from 'pg';
import type { DeliveryRow } from './delivery-view.ts';
import { deliveryListenedSql } from './listeners.ts';
import { deliveryNotificationSql, NOTIFY_CHANNEL } from './notify.ts';
import { leasedSlotsSql } from './slot-lease.ts';

/** Extra time on top of the webhook's timeout before an attempt counts as lost (runner died). */
export const LEASE_MARGIN_MS = 15_000;
/** How long a delivery that found its webhook at maxInFlight waits before trying again. */
export const IN_FLIGHT_RETRY_MS = 100;

export interface ClaimedDelivery {
  row: DeliveryRow;
  attempt: number;
  /** Bytes to send and their headers: the dispatch snapshot, or the source event's payload. */
  body: Buffer | null;
  contentType: string | null;
  dispatchHeaders: Record<string, string> | null;
  hasDispatch: boolean;
  eventHeaders: Record<string, string>;
  /** The source event as an Automation sees it (besides its headers and payload). */
  event: { channel: string; method: string | null; path: string | null; query: Record<string, unknown>; receivedAt: Date };
  signingSecretsEnc: string[];
  webhook: {
    status: string;
    deliveryMode: string;
    maxInFlight: number;
    timeoutMs: number;
    retryPolicy: unknown;
    customHeaders: Record<string, string>;
    throttleRatePerSecond: number | null;
    transform: unknown;
  };
  /** The previous attempt was lost with its runner; it is recorded before this one. */
  lostPrevious: boolean;
}

export type ClaimOutcome =
  | { kind: 'claimed'; claim: ClaimedDelivery }
  | { kind: 'skip'; reason: string }
  | { kind: 'later'; runAt: Date; reason: string };

const SELECT_FOR_CLAIM = `
SELECT d.*, COALESCE(d.dispatch_body, e.body) AS payload, d.dispatch_body IS NOT NULL AS has_dispatch,
       COALESCE(d.dispatch_content_type, e.content_type) AS payload_content_type, e.headers AS event_headers,
       e.channel AS event_channel, e.method AS event_method, e.path AS event_path, e.query AS event_query, e.received_at AS event_received_at,
       w.status AS webhook_status, w.delivery_mode, w.max_in_flight, w.timeout_ms, w.retry_policy, w.custom_headers,
       w.throttle_rate_per_second, w.transform,
       (SELECT array_agg(s.secret_enc ORDER BY s.version DESC) FROM webhook_secrets s
         WHERE s.webhook_id = d.webhook_id AND s.kind = 'signing' AND (s.expires_at IS NULL OR s.expires_at > now())) AS signing_secrets,
       (now() AT TIME ZONE 'UTC') AS db_now
  FROM deliveries d
  JOIN webhooks w ON w.id = d.webhook_id
  JOIN events e ON e.id = d.event_id
 WHERE d.id = $1`;

/**
 * Decides whether this job may attempt the delivery now (optimistically: the final statement
 * only starts the attempt if the delivery is still as it was read):
 * terminal or already-running deliveries are skipped; a paused or archived webhook leaves
 * it waiting; strict FIFO lets only the webhook's oldest unfinished delivery through;
 * parallel mode admits at most maxInFlight running attempts per webhook; throttling hands
 * out send slots. On success the delivery is `delivering` with a lease. `underLease`: a drain
 * takes the delivery over in one of its leased slots (slot-lease.ts) rather than one of in_flight.
 */
export async function claimDelivery(client: pg.Pool | pg.PoolClient, deliveryId: string, underLease?: string): Promise<ClaimOutcome> {
  const { rows } = await client.query(SELECT_FOR_CLAIM, [deliveryId]);
  const d = rows[0];
  if (!d) return { kind: 'skip', reason: 'no such delivery' };
  const now: Date = d.db_now;
  if (d.status === 'succeeded' || d.status === 'failed' || d.status === 'cancelled') return { kind: 'skip', reason: 'terminal' };
  let lostPrevious = false;
  if (d.status === 'delivering') {
    if (d.lease_until && d.lease_until > now) return { kind: 'skip', reason: 'attempt in progress' };
    lostPrevious = true;
  }
  if (d.webhook_status !== 'active') return { kind: 'skip', reason: `webhook ${d.webhook_status}` };
  if (!lostPrevious && d.next_attempt_at && d.next_attempt_at.getTime() > now.getTime() + 20) {
    return { kind: 'later', runAt: d.next_attempt_at, reason: 'not due' };
  }

  if (d.delivery_mode === 'strict_fifo') {
    const head = await client.query(
      `SELECT id FROM deliveries WHERE webhook_id = $1 AND status IN ('queued','scheduled','delivering','retrying') ORDER BY seq LIMIT 1`,
      [d.webhook_id],
    );
    if (head.rows[0]?.id !== d.id) return { kind: 'skip', reason: 'not the FIFO head' };
  }

  if (d.throttle_rate_per_second) {
    const slot = d.throttle_slot_at as Date | null;
    if (!slot || lostPrevious) {
      const interval = 1000 / d.throttle_rate_per_second;
      const taken = await client.query(
        `UPDATE webhooks SET throttle_next_at = GREATEST(COALESCE(throttle_next_at, now()), now()) + make_interval(secs => $2::float8 / 1000)
          WHERE id = $1 RETURNING throttle_next_at - make_interval(secs => $2::float8 / 1000) AS slot`,
        [d.webhook_id, interval],
      );
      const mine: Date = taken.rows[0].slot;
      if (mine.getTime() > now.getTime() + 5) {
        await client.query('UPDATE deliveries SET throttle_slot_at = $2, next_attempt_at = $2, updated_at = now() WHERE id = $1', [d.id, mine]);
        return { kind: 'later', runAt: mine, reason: 'throttled' };
      }
    } else if (slot.getTime() > now.getTime() + 20) {
      return { kind: 'later', runAt: slot, reason: 'throttle slot not reached' };
    }
    // A job that starts late must not send right behind the previous one: keep at least one
    // interval between sends (atomic under the webhook's row lock across runners).
    const gap = await client.query(
      `UPDATE webhooks SET throttle_last_sent_at = now()
        WHERE id = $1 AND (throttle_last_sent_at IS NULL OR throttle_last_sent_at <= now() - make_interval(secs => $2::float8 / 1000))
        RETURNING 1`,
      [d.webhook_id, 1000 / d.throttle_rate_per_second - 2],
    );
    if (gap.rowCount === 0) {
      const { rows: w } = await client.query(
        'SELECT throttle_last_sent_at + make_interval(secs => $2::float8 / 1000) AS at FROM webhooks WHERE id = $1',
        [d.webhook_id, 1000 / d.throttle_rate_per_second],
      );
      await client.query('UPDATE deliveries SET throttle_slot_at = $2, next_attempt_at = $2, updated_at = now() WHERE id = $1', [d.id, w[0].at]);
      return { kind: 'later', runAt: w[0].at, reason: 'throttled (minimum gap)' };
    }
  }

  const attempt = d.attempts + 1;
  const leaseMs = d.timeout_ms + LEASE_MARGIN_MS;
  // The webhook's in-flight counter, with the live slot leases of the drains (slot-lease.ts), is
  // the maxInFlight semaphore across runners: taken here in the same statement that starts the
  // attempt, released by the statement that records it (recordAttempts). An attempt claimed this
  // way whose runner died keeps its slot for the retry that takes over; one a drain had claimed
  // under a lease (slot_lease) takes a slot of its own, the dead drain's lease running out.
  // Taking it last keeps the webhook row locked for one statement and an unflushed commit.
  const keepsSlot = !!underLease || (lostPrevious && !d.slot_lease);
  const updated = await client.query(
    `WITH cand AS (
       SELECT id FROM deliveries WHERE id = $1 AND status = $6 AND attempts = $7 FOR UPDATE
     ), slot AS (
       UPDATE webhooks SET in_flight = in_flight + 1
        WHERE id = $4 AND NOT $5::bool AND in_flight < max_in_flight - ${leasedSlotsSql('$4')} AND EXISTS (SELECT 1 FROM cand) RETURNING 1
     ), upd AS (
       UPDATE deliveries SET status = 'delivering', attempts = $2, lease_until = now() + make_interval(secs => $3::float8 / 1000),
              next_attempt_at = NULL, throttle_slot_at = NULL, slot_lease = $9, updated_at = now()
        WHERE id IN (SELECT id FROM cand) AND ($5::bool OR EXISTS (SELECT 1 FROM slot)) RETURNING *
     ), handed AS (
       -- Taken over under a lease from a one-at-a-time attempt: that attempt's in_flight slot is given back.
       UPDATE webhooks SET in_flight = GREATEST(in_flight - 1, 0) WHERE id = $4 AND $10::bool AND EXISTS (SELECT 1 FROM upd)
     ), n AS (
       -- deliveryUpdated ('delivering'), when someone listens (listeners.ts): computed from the updated row, as the batch claim does.
       SELECT pg_notify($8, ${deliveryNotificationSql('upd')}) FROM upd WHERE ${deliveryListenedSql('upd.project_id')}
     )
     SELECT u.*, (SELECT count(*) FROM cand)::int AS cand_count, (SELECT count(*) FROM n)::int AS notified
       FROM (SELECT 1) AS one LEFT JOIN upd u ON true`,
    [d.id, attempt, leaseMs, d.webhook_id, keepsSlot, d.status, d.attempts, NOTIFY_CHANNEL, underLease ?? null, !!underLease && lostPrevious && !d.slot_lease],
  );
  const result = updated.rows[0];
  if (!result?.id) {
    // Someone else moved the delivery on since it was read: their job carries it forward.
    if (!result?.cand_count) return { kind: 'skip', reason: 'changed concurrently' };
    return { kind: 'later', runAt: new Date(Date.now() + IN_FLIGHT_RETRY_MS + Math.random() * IN_FLIGHT_RETRY_MS), reason: 'maxInFlight reached' };
  }
  const row = result;
  return {
    kind: 'claimed',
    claim: {
      row,
      attempt,
      body: d.payload,
      contentType: d.payload_content_type,
      dispatchHeaders: d.dispatch_headers,
      hasDispatch: d.has_dispatch,
      eventHeaders: d.event_headers ?? {},
      event: { channel: d.event_channel, method: d.event_method, path: d.event_path, query: d.event_query ?? {}, receivedAt: d.event_received_at },
      signingSecretsEnc: d.signing_secrets ?? [],
      webhook: {
        status: d.webhook_status,
        deliveryMode: d.delivery_mode,
        maxInFlight: d.max_in_flight,
        timeoutMs: d.timeout_ms,
        retryPolicy: d.retry_policy,
        customHeaders: d.custom_headers ?? {},
        throttleRatePerSecond: d.throttle_rate_per_second,
        transform: d.transform,
      },
      lostPrevious,
    },
  };
}

