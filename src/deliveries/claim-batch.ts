import type pg from 'pg';
import { LEASE_MARGIN_MS, type ClaimedDelivery } from './claim.ts';
import { addAttemptJobSql, ATTEMPT_TASK, attemptJobKeySql, handOffJobKeySql } from './job.ts';
import { deliveryListenedSql } from './listeners.ts';
import { deliveryNotificationSql, NOTIFY_CHANNEL } from './notify.ts';

/** Most deliveries of one webhook a drain (see attemptDelivery) has in flight at once, and so claims in one statement. */
export const DRAIN_MAX_IN_FLIGHT = 200;

/**
 * How many more of the oldest queued deliveries a claim looks at beyond the number it wants, to
 * skip those whose job a runner already holds (up to a local queue and its running jobs per
 * runner: see heldJobsMargin). The scan walks the status index in order and stops there:
 * filtering the jobs first would visit every queued delivery of the webhook on each claim.
 */
export function heldJobsMargin(workerConcurrency: number): number {
  return Math.max(128, 4 * workerConcurrency);
}

/**
 * What a drain's attempts need of their webhook beside the delivery (its settings and signing
 * secrets), as one batch claim read them with the webhook's config_version: ingest in the same
 * process may claim a new delivery for the drain in its own statement (see DirectClaim in
 * batch-run.ts) only while the webhook's config_version is still this one, so the attempt starts
 * with exactly what a claim would read. Every column here raises config_version (migrations
 * ingest_target_version, direct_claims), and so does every change to the webhook's secrets;
 * `validUntil` (local clock) is when the first of those secrets expires.
 */
export interface DirectClaimConfig {
  version: number;
  webhook: ClaimedDelivery['webhook'];
  signingSecretsEnc: string[];
  validUntil: number;
}

export type BatchClaimOutcome =
  /** Claimed: the named deliveries that were due, then the webhook's oldest due ones, up to `max`. */
  | {
      kind: 'claimed';
      webhookId: string;
      /** The webhook's publicId and project: its change notifications name it so. */
      publicId: string;
      projectId: string;
      claims: ClaimedDelivery[];
      /** Named deliveries whose attempt was lost with its runner (lease ran out): the one-at-a-time claim takes them over. */
      lost: string[];
      /** Named deliveries not due yet, with their time. */
      notDue: { id: string; at: Date }[];
      /** Jobs of claimed deliveries deleted before they ran. */
      jobsDeleted: number;
      /** The webhook as this claim read it: what ingest's direct claims start with (see DirectClaimConfig). */
      config: DirectClaimConfig;
    }
  /** The webhook is strict FIFO or throttled: one delivery at a time. */
  | { kind: 'single' }
  /** Nothing to claim: no such delivery or webhook, or the webhook is not active. */
  | { kind: 'none' };

/**
 * Gives the webhook a hand-off job naming its oldest due delivery (at `runAt`, or now): when a job
 * that drained the webhook stops with work left (time budget, shutdown), or when jobs found every
 * slot leased by another runner's drain (later: should that drain stop first). The drain that job
 * starts claims the webhook's other due deliveries with it. One job, never one per delivery: the
 * jobs of those deliveries may be the running ones, still locked, and re-adding a job under a
 * locked job's key updates that row; a statement updating several could deadlock with
 * graphile-worker's batched completion deleting them in another order (which stops its pool).
 * Its key is the webhook's, not the delivery's: a claim taking that delivery meanwhile (another
 * runner's drain) deletes the delivery's job, and with it would go the only job the others had.
 */
export async function handOffDueDeliveries(client: pg.Pool | pg.PoolClient, webhookId: string, runAt?: Date): Promise<void> {
  await client.query({
    name: 'hand_off_due_deliveries',
    text: `SELECT ${addAttemptJobSql('$2', 'n.id', '$1::text', 'COALESCE($3::timestamptz, now())', handOffJobKeySql('$1::text'))}
             FROM (SELECT u.id FROM (
                     (SELECT id, seq FROM deliveries WHERE webhook_id = $1 AND status = 'queued' ORDER BY seq LIMIT 1)
                     UNION ALL
                     (SELECT id, seq FROM deliveries WHERE webhook_id = $1 AND status IN ('retrying', 'scheduled') AND next_attempt_at <= now() ORDER BY seq LIMIT 1)
                   ) u ORDER BY u.seq LIMIT 1) n`,
    values: [webhookId, ATTEMPT_TASK, runAt ?? null],
  });
}

/**
 * Deletes the jobs of a webhook's queued deliveries after `afterSeq` ('0': from the head; in seq
 * order, at most `limit` deliveries looked at), while a drain of the webhook works through its
 * backlog: the drain claims them itself (a claim deletes the jobs of what it takes anyway), and
 * graphile-worker, which runs the oldest jobs first, no longer fetches them only to have each name
 * its delivery to the drain and finish (about a tenth of a drain's CPU per delivery here), nor
 * makes other webhooks' jobs wait behind them. Jobs a runner holds, and rows another statement has
 * locked, are left. Should the drain stop, its hand-off job takes the rest (batch-run.ts); should
 * its runner die, the sweeper gives them jobs again (sweep.ts).
 */
export async function takeOverBacklogJobs(
  client: pg.Pool | pg.PoolClient,
  webhookId: string,
  afterSeq: string,
  limit: number,
): Promise<{ looked: number; deleted: number; lastSeq: string | null }> {
  const { rows } = await client.query({
    name: 'take_over_backlog_jobs',
    text: `WITH q AS (
             SELECT d.id, d.seq FROM deliveries d WHERE d.webhook_id = $1 AND d.status = 'queued' AND d.seq > $2::bigint ORDER BY d.seq LIMIT $3
           ), taken AS (
             -- Rows another statement holds are skipped, never waited for: the drain's own claims
             -- delete some of the same jobs, in an order of their own (waiting, the two could deadlock).
             SELECT j.id FROM graphile_worker._private_jobs j WHERE j.key IN (SELECT ${attemptJobKeySql('id')} FROM q) AND j.locked_at IS NULL
                FOR UPDATE SKIP LOCKED
           ), gone AS (
             DELETE FROM graphile_worker._private_jobs j USING taken WHERE j.id = taken.id
             RETURNING 1
           )
           SELECT (SELECT count(*) FROM q)::int AS looked, (SELECT max(seq) FROM q)::text AS last_seq, (SELECT count(*) FROM gone)::int AS deleted`,
    values: [webhookId, afterSeq, limit],
  });
  return { looked: rows[0].looked, deleted: rows[0].deleted, lastSeq: rows[0].last_seq };
}

/**
 * Sends the `delivering` change of a delivery ingest claimed as it wrote it (a direct claim,
 * batch-run.ts), when someone listens: before its attempt starts, so before its result's change,
 * as a claim statement sends it on commit. Ingest's own statement does not: a durable commit that
 * notifies holds PostgreSQL's notification lock until its WAL is flushed (see insertDelivery).
 */
export async function announceDirectClaim(client: pg.Pool | pg.PoolClient, deliveryId: string): Promise<void> {
  await client.query({
    name: 'announce_direct_claim',
    text: `SELECT pg_notify('${NOTIFY_CHANNEL}', ${deliveryNotificationSql('d')}) FROM deliveries d WHERE d.id = $1 AND d.status = 'delivering' AND d.attempts = 1`,
    values: [deliveryId],
  });
}

/**
 * Claims, in one statement, up to `max` due deliveries of a webhook under a slot lease of this
 * runner's drain (see slot-lease.ts): the named ones first (the jobs that asked for them), then
 * the webhook's oldest due ones. Only for active webhooks in parallel mode without throttling
 * (their deliveries need no order between them). No row every delivery of the webhook shares is
 * locked or written: the lease bounds the attempts, and two runners' claims meeting on one
 * delivery are decided by its own row (the second finds it no longer waiting).
 *
 * Siblings are taken among deliveries whose job no runner holds yet (held jobs are about to run
 * and name their delivery), and their jobs are deleted: their work is done here, so a backlog
 * costs a job run per batch rather than per delivery. The delete is on graphile-worker's job
 * table itself, keyed by job_key: its remove_job() would add a NOTIFY per job to every runner.
 */
export async function claimDeliveryBatch(
  client: pg.Pool | pg.PoolClient,
  webhookId: string,
  named: string[],
  max: number,
  margin: number,
  leaseId: string,
): Promise<BatchClaimOutcome> {
  const askedAt = Date.now();
  const { rows } = await client.query({
    name: 'claim_delivery_batch',
    text: `
WITH w AS (
  SELECT w.id, w.public_id, w.project_id, w.status, w.delivery_mode, w.throttle_rate_per_second, w.max_in_flight, w.timeout_ms, w.config_version,
         w.retry_policy, w.custom_headers, w.transform,
         (w.status = 'active' AND w.delivery_mode = 'parallel' AND w.throttle_rate_per_second IS NULL) AS batchable,
         ${deliveryListenedSql('w.project_id')} AS listened
    FROM webhooks w WHERE w.id = $4::text
), own AS (
  SELECT d.id, d.seq, d.status, d.next_attempt_at, d.lease_until FROM deliveries d, w WHERE d.id = ANY($1::text[]) AND d.webhook_id = w.id
), due AS (
  SELECT u.id, u.seq FROM (
    (SELECT o.id, o.seq FROM own o, w WHERE w.batchable AND o.status IN ('queued', 'retrying', 'scheduled')
        AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= now()))
    UNION
    (SELECT q.id, q.seq FROM (
       SELECT d.id, d.seq FROM deliveries d WHERE (SELECT batchable FROM w) AND d.webhook_id = (SELECT id FROM w) AND d.status = 'queued'
        ORDER BY d.seq LIMIT $2 + $5::int) q
      -- Its job (one per key), if any, is not held by a runner: a lookup by key per candidate. (As
      -- NOT EXISTS it was planned as an anti-join over a sequential scan of the whole job table,
      -- a quarter of a backlog claim's time.)
      WHERE (SELECT j.locked_at FROM graphile_worker._private_jobs j WHERE j.key = ${attemptJobKeySql('q.id')}) IS NULL
      ORDER BY q.seq LIMIT $2)
    UNION
    (SELECT d.id, d.seq FROM deliveries d WHERE (SELECT batchable FROM w) AND d.webhook_id = (SELECT id FROM w) AND d.status = 'retrying'
        AND d.next_attempt_at <= now() ORDER BY d.seq LIMIT $2)
    UNION
    (SELECT d.id, d.seq FROM deliveries d WHERE (SELECT batchable FROM w) AND d.webhook_id = (SELECT id FROM w) AND d.status = 'scheduled'
        AND d.next_attempt_at <= now() ORDER BY d.seq LIMIT $2)
  ) u
  ORDER BY u.id = ANY($1::text[]) DESC, u.seq
  LIMIT $2
), upd AS (
  UPDATE deliveries d
     SET status = 'delivering', attempts = d.attempts + 1,
         -- Twice the timeout: a claimed delivery may wait in line for one of the drain's slots; the drain starts it only while this outlives its attempt (batch-run.ts).
         lease_until = now() + make_interval(secs => ((SELECT timeout_ms FROM w) * 2 + $3::int)::float8 / 1000),
         next_attempt_at = NULL, throttle_slot_at = NULL, slot_lease = $6, updated_at = now()
    FROM due
   WHERE d.id = due.id AND d.status IN ('queued', 'retrying', 'scheduled')
  RETURNING d.*
), published AS (
  -- deliveryUpdated ('delivering') for every claimed delivery, sent when the claim commits: before any of their results
  -- (when someone listens: listeners.ts).
  SELECT pg_notify('${NOTIFY_CHANNEL}', ${deliveryNotificationSql('u')}) FROM upd u WHERE (SELECT listened FROM w)
), gone AS (
  DELETE FROM graphile_worker._private_jobs j
   WHERE j.key IN (SELECT ${attemptJobKeySql('id')} FROM upd) AND j.locked_at IS NULL
  RETURNING 1
)
-- What concerns the whole batch (the webhook's settings and secrets, the named deliveries' fate)
-- comes on one row, the head: the others would only be parsed again and thrown away.
SELECT c.*, h.head, (SELECT count(*)::int FROM gone) AS jobs_deleted, (SELECT count(*)::int FROM published) AS published, w.id AS batch_webhook_id, w.status AS webhook_status, w.delivery_mode, w.max_in_flight, w.timeout_ms,
       CASE WHEN h.head THEN w.config_version END AS config_version, CASE WHEN h.head THEN w.public_id END AS webhook_public_id,
       CASE WHEN h.head THEN w.project_id END AS webhook_project_id,
       CASE WHEN h.head THEN w.retry_policy END AS retry_policy, CASE WHEN h.head THEN w.custom_headers END AS custom_headers,
       w.throttle_rate_per_second, CASE WHEN h.head THEN w.transform END AS transform, w.batchable,
       CASE WHEN h.head THEN (SELECT array_agg(id) FROM own WHERE status = 'delivering' AND lease_until < now()) END AS lost_ids,
       CASE WHEN h.head THEN (SELECT json_agg(json_build_object('id', id, 'at', next_attempt_at)) FROM own
         WHERE status IN ('retrying', 'scheduled') AND next_attempt_at > now()) END AS not_due,
       CASE WHEN h.head THEN (SELECT array_agg(s.secret_enc ORDER BY s.version DESC) FROM webhook_secrets s
         WHERE s.webhook_id = w.id AND s.kind = 'signing' AND (s.expires_at IS NULL OR s.expires_at > now())) END AS signing_secrets,
       CASE WHEN h.head THEN (SELECT (extract(epoch FROM min(s.expires_at) - now()) * 1000)::float8 FROM webhook_secrets s
         WHERE s.webhook_id = w.id AND s.kind = 'signing' AND s.expires_at > now()) END AS secrets_expire_in_ms
  FROM w
  LEFT JOIN (
    SELECT u.*, COALESCE(u.dispatch_body, e.body) AS payload, u.dispatch_body IS NOT NULL AS has_dispatch,
           COALESCE(u.dispatch_content_type, e.content_type) AS payload_content_type, e.headers AS event_headers,
           e.channel AS event_channel, e.method AS event_method, e.path AS event_path, e.query AS event_query, e.received_at AS event_received_at
      FROM upd u JOIN events e ON e.id = u.event_id
  ) c ON true
  CROSS JOIN LATERAL (SELECT (c.id IS NULL OR c.seq = (SELECT min(seq) FROM upd)) AS head) h`,
    values: [named, max, LEASE_MARGIN_MS, webhookId, margin, leaseId],
  });
  const first = rows.find((r) => r.head) ?? rows[0];
  if (!first) return { kind: 'none' };
  if (!first.batchable) return first.webhook_status === 'active' ? { kind: 'single' } : { kind: 'none' };
  // One webhook object for the whole batch: its retry policy is normalised once (see sendClaimed).
  const webhook: ClaimedDelivery['webhook'] = {
    status: first.webhook_status,
    deliveryMode: first.delivery_mode,
    maxInFlight: first.max_in_flight,
    timeoutMs: first.timeout_ms,
    retryPolicy: first.retry_policy,
    customHeaders: first.custom_headers ?? {},
    throttleRatePerSecond: first.throttle_rate_per_second,
    transform: first.transform,
  };
  const signingSecretsEnc: string[] = first.signing_secrets ?? [];
  const claims: ClaimedDelivery[] = [];
  for (const d of rows) {
    if (!d.id) continue;
    const { payload, has_dispatch, payload_content_type, event_headers, event_channel, event_method, event_path, event_query, event_received_at, jobs_deleted: _j, published: _pub, batch_webhook_id: _w, webhook_status: _s, delivery_mode: _m,
      max_in_flight: _x, timeout_ms: _t, retry_policy: _r, custom_headers: _c, throttle_rate_per_second: _p, transform: _x2, batchable: _b, lost_ids: _l,
      not_due: _n, signing_secrets: _g, head: _h, config_version: _v, webhook_public_id: _pi, webhook_project_id: _pp, secrets_expire_in_ms: _e, ...row } = d;
    claims.push({
      row,
      attempt: row.attempts,
      body: payload,
      contentType: payload_content_type,
      dispatchHeaders: row.dispatch_headers,
      hasDispatch: has_dispatch,
      eventHeaders: event_headers ?? {},
      event: { channel: event_channel, method: event_method, path: event_path, query: event_query ?? {}, receivedAt: event_received_at },
      signingSecretsEnc,
      webhook,
      lostPrevious: false,
    });
  }
  return {
    kind: 'claimed',
    webhookId: first.batch_webhook_id,
    claims,
    lost: first.lost_ids ?? [],
    jobsDeleted: first.jobs_deleted ?? 0,
    notDue: ((first.not_due ?? []) as { id: string; at: string }[]).map((n) => ({ id: n.id, at: new Date(n.at) })),
    publicId: first.webhook_public_id,
    projectId: first.webhook_project_id,
    config: { version: first.config_version, webhook, signingSecretsEnc, validUntil: first.secrets_expire_in_ms == null ? Infinity : askedAt + first.secrets_expire_in_ms },
  };
}
