import { Webhook } from 'standardwebhooks';
import { decryptSecret } from '../encryption.ts';
import { createOutboundClient, type OutboundClient } from '../outbound/http-client.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';

export const DRAIN_SEND_TASK = 'drains__send';
/** Events per request (CONTRACT §9: at most 100). */
export const DRAIN_BATCH = 100;
/** How long one job keeps sending before it hands on to a new one. */
const SEND_BUDGET_MS = 5_000;
/**
 * Only events at least this old (their transaction's start) are read: an event whose
 * transaction took a lower outbox id but commits later than one already read would otherwise
 * overtake it more often (it is never lost: sent rows are deleted by id).
 */
export const DRAIN_SETTLE_MS = 500;
/** Drain sends running at once in one process: the rest are planned again shortly, so they never hold the runner's slots. */
export const DRAIN_MAX_CONCURRENT_SENDS = 2;
const SCHEDULE_LOCK = 727_021;
let activeSends = 0;

interface DrainRow {
  id: string;
  url: string;
  enabled: boolean;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_expires_at: Date | null;
  failures: number;
}

interface OutboxRow {
  id: string;
  event_id: string;
  kind: string;
  occurred_at: Date;
  project_id: string;
  webhook_id: string | null;
  data: unknown;
}

/** The HTTP client of drain sends (the destinations' client: private addresses refused unless allowed). */
export function createDrainClient(rt: Pick<Runtime, 'config'>): OutboundClient {
  return createOutboundClient({ allowPrivate: rt.config.ALLOW_PRIVATE_DESTINATIONS, maxSockets: 16 });
}

/** The next run of a drain's send job (its key and named queue: one at a time, in order). */
async function planSend(rt: Pick<Runtime, 'db'>, drainId: string, delayMs: number) {
  await rt.db.pool.query(
    `SELECT graphile_worker.add_job($1, json_build_object('drainId', $2::text), queue_name := 'drain:' || $2, run_at := now() + make_interval(secs => $3),
       job_key := 'drain:' || $2, job_key_mode := 'replace')`,
    [DRAIN_SEND_TASK, drainId, delayMs / 1000],
  );
}

/**
 * Sends a drain's pending events, oldest first, in batches of at most DRAIN_BATCH:
 * `POST url` with `{"events": [...]}`, signed the Standard Webhooks way with the drain's secret
 * (and the previous one during a rotation's grace period). A 2xx answer removes the batch from
 * the outbox; anything else leaves it and plans the next try with exponential backoff
 * (DRAIN_RETRY_BASE_MS doubling up to DRAIN_RETRY_MAX_MS).
 *
 * The guarantee: at least once (a batch is deleted, by its ids, only after a 2xx; a crash
 * between the answer and the delete sends it again), in outbox order (one send job at a time
 * per drain: its named queue). Events are read once DRAIN_SETTLE_MS old, so one whose
 * transaction commits within that time after a later one still goes first; one committed later
 * than that may follow events written after it, and is never lost.
 *
 * At most DRAIN_MAX_CONCURRENT_SENDS drains send at once per process; another drain's job is
 * planned again a moment later instead of waiting in a runner's slot.
 */
export async function sendDrain(rt: Pick<Runtime, 'db' | 'config'>, client: OutboundClient, drainId: string): Promise<void> {
  if (activeSends >= DRAIN_MAX_CONCURRENT_SENDS) return planSend(rt, drainId, 250);
  activeSends++;
  try {
    await sendDrainNow(rt, client, drainId);
  } finally {
    activeSends--;
  }
}

async function sendDrainNow(rt: Pick<Runtime, 'db' | 'config'>, client: OutboundClient, drainId: string): Promise<void> {
  const db = rt.db.pool;
  const { rows } = await db.query<DrainRow>('SELECT id, url, enabled, secret_enc, previous_secret_enc, previous_expires_at, failures FROM event_drains WHERE id = $1', [drainId]);
  const drain = rows[0];
  if (!drain || !drain.enabled) return;
  const secrets = [decryptSecret(drain.secret_enc)];
  if (drain.previous_secret_enc && drain.previous_expires_at && drain.previous_expires_at > new Date()) secrets.push(decryptSecret(drain.previous_secret_enc));
  const signers = secrets.map((s) => new Webhook(s));
  const deadline = Date.now() + SEND_BUDGET_MS;
  let failures = drain.failures;
  for (;;) {
    const { rows: batch } = await db.query<OutboxRow>(
      `SELECT id, event_id, kind, occurred_at, project_id, webhook_id, data FROM drain_outbox
        WHERE drain_id = $1 AND occurred_at <= now() - make_interval(secs => $3) ORDER BY id LIMIT $2`,
      [drainId, DRAIN_BATCH, DRAIN_SETTLE_MS / 1000],
    );
    if (batch.length === 0) return;
    const body = JSON.stringify({
      events: batch.map((e) => ({ id: e.event_id, kind: e.kind, occurredAt: e.occurred_at.toISOString(), projectId: e.project_id, webhookId: e.webhook_id, data: e.data })),
    });
    const msgId = `msg_${batch[0].event_id}`;
    const at = new Date();
    const res = await client.send({
      url: drain.url,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'relay-service-drain/1',
        'webhook-id': msgId,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signers.map((s) => s.sign(msgId, at, body)).join(' '),
      },
      body: Buffer.from(body),
      timeoutMs: rt.config.DRAIN_TIMEOUT_MS,
    });
    if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) {
      failures = 0;
      await db.query(
        // Exactly the rows sent: one with a lower id whose transaction committed while the
        // request was out is still to be sent.
        `WITH sent AS (DELETE FROM drain_outbox WHERE drain_id = $1 AND id = ANY ($2::bigint[]))
         UPDATE event_drains SET failures = 0, last_error = NULL, last_sent_at = now() WHERE id = $1`,
        [drainId, batch.map((e) => e.id)],
      );
      if (Date.now() > deadline) return planSend(rt, drainId, 0);
      continue;
    }
    failures++;
    const error = res.error ?? `HTTP ${res.statusCode}`;
    const delay = Math.min(rt.config.DRAIN_RETRY_BASE_MS * 2 ** Math.min(failures - 1, 30), rt.config.DRAIN_RETRY_MAX_MS);
    log.debug({ drainId, error, delay }, 'drain send failed; retrying later');
    await db.query('UPDATE event_drains SET failures = $2, last_error = $3 WHERE id = $1', [drainId, failures, error.slice(0, 500)]);
    return planSend(rt, drainId, delay);
  }
}

/**
 * One pass of the drains' housekeeping, outside the delivery path (drain_emit only writes
 * outbox rows): plans a send job for every enabled drain with pending events that has none
 * live (a job in backoff keeps its time; one that failed for good is taken up again), and holds each outbox to DRAIN_OUTBOX_LIMIT whatever the
 * backoff: past it, the oldest events are dropped and counted in the drain's droppedCount.
 * Only drains whose outbox id span passes the limit are counted (two index look-ups each).
 */
export async function planDrainSends(rt: Pick<Runtime, 'db' | 'config'>): Promise<{ planned: number; dropped: number }> {
  // A session-level lock held across statements: on the server itself, never through a pooler.
  const client = await rt.db.direct.connect();
  try {
    const { rows: lock } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [SCHEDULE_LOCK]);
    if (!lock[0].ok) return { planned: 0, dropped: 0 };
    try {
      const { rows: trimmed } = await client.query<{ n: string }>(
        `WITH spans AS (
           SELECT d.id,
                  (SELECT o.id FROM drain_outbox o WHERE o.drain_id = d.id ORDER BY o.id LIMIT 1) AS lo,
                  (SELECT o.id FROM drain_outbox o WHERE o.drain_id = d.id ORDER BY o.id DESC LIMIT 1) AS hi
             FROM event_drains d
         ), cuts AS (
           SELECT s.id, (SELECT o.id FROM drain_outbox o WHERE o.drain_id = s.id ORDER BY o.id DESC OFFSET $1 LIMIT 1) AS cut
             FROM spans s WHERE s.hi - s.lo >= $1
         ), gone AS (
           DELETE FROM drain_outbox o USING cuts c WHERE c.cut IS NOT NULL AND o.drain_id = c.id AND o.id <= c.cut RETURNING o.drain_id
         ), counts AS (SELECT drain_id, count(*) AS n FROM gone GROUP BY drain_id)
         UPDATE event_drains d SET dropped_count = d.dropped_count + counts.n FROM counts WHERE d.id = counts.drain_id RETURNING counts.n`,
        [rt.config.DRAIN_OUTBOX_LIMIT],
      );
      const { rows: planned } = await client.query(
        `SELECT graphile_worker.add_job($1, json_build_object('drainId', d.id), queue_name := 'drain:' || d.id, run_at := now() + interval '1 second',
                job_key := 'drain:' || d.id, job_key_mode := 'preserve_run_at')
           FROM event_drains d
          WHERE d.enabled AND EXISTS (SELECT 1 FROM drain_outbox o WHERE o.drain_id = d.id)
            AND NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs j
                             WHERE j.key = 'drain:' || d.id AND j.attempts < j.max_attempts
                               AND (j.locked_at IS NULL OR j.locked_at > now() - interval '5 minutes'))`,
        [DRAIN_SEND_TASK],
      );
      const dropped = trimmed.reduce((a, r) => a + Number(r.n), 0);
      if (dropped > 0) log.info({ dropped }, 'drain outboxes trimmed to DRAIN_OUTBOX_LIMIT');
      return { planned: planned.length, dropped };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SCHEDULE_LOCK]);
    }
  } finally {
    client.release();
  }
}

/** Every job runner runs planDrainSends about once a second (one runner at a time: an advisory lock). */
export function startDrainScheduler(rt: Pick<Runtime, 'db' | 'config'>, everyMs = 1_000) {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    planDrainSends(rt)
      .catch((err) => log.warn({ err }, 'drain scheduling failed'))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
