import { Webhook } from 'standardwebhooks';
import { decryptSecret } from '../encryption.ts';
import { createOutboundClient, type OutboundClient } from '../destinations/senders/http.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';

export const DRAIN_SEND_TASK = 'drains__send';
/** Events per request (CONTRACT §9: at most 100). */
export const DRAIN_BATCH = 100;
/** How long one job keeps sending before it hands on to a new one. */
const SEND_BUDGET_MS = 10_000;

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
 * (DRAIN_RETRY_BASE_MS doubling up to DRAIN_RETRY_MAX_MS): at least once, in order.
 *
 * The outbox is bounded (DRAIN_OUTBOX_LIMIT): past it, the oldest events are dropped and
 * counted in the drain's droppedCount, so a drain that fails for long costs neither deliveries
 * nor the database more than that.
 */
export async function sendDrain(rt: Pick<Runtime, 'db' | 'config'>, client: OutboundClient, drainId: string): Promise<void> {
  const db = rt.db.pool;
  const { rows } = await db.query<DrainRow>('SELECT id, url, enabled, secret_enc, previous_secret_enc, previous_expires_at, failures FROM event_drains WHERE id = $1', [drainId]);
  const drain = rows[0];
  if (!drain || !drain.enabled) return;
  await db.query(
    `WITH over AS (
       DELETE FROM drain_outbox WHERE id IN (SELECT id FROM drain_outbox WHERE drain_id = $1 ORDER BY id DESC OFFSET $2) RETURNING 1
     ) UPDATE event_drains SET dropped_count = dropped_count + (SELECT count(*) FROM over) WHERE id = $1 AND EXISTS (SELECT FROM over)`,
    [drainId, rt.config.DRAIN_OUTBOX_LIMIT],
  );
  const secrets = [decryptSecret(drain.secret_enc)];
  if (drain.previous_secret_enc && drain.previous_expires_at && drain.previous_expires_at > new Date()) secrets.push(decryptSecret(drain.previous_secret_enc));
  const signers = secrets.map((s) => new Webhook(s));
  const deadline = Date.now() + SEND_BUDGET_MS;
  let failures = drain.failures;
  for (;;) {
    const { rows: batch } = await db.query<OutboxRow>(
      'SELECT id, event_id, kind, occurred_at, project_id, webhook_id, data FROM drain_outbox WHERE drain_id = $1 ORDER BY id LIMIT $2',
      [drainId, DRAIN_BATCH],
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
        `WITH sent AS (DELETE FROM drain_outbox WHERE drain_id = $1 AND id <= $2)
         UPDATE event_drains SET failures = 0, last_error = NULL, last_sent_at = now() WHERE id = $1`,
        [drainId, batch[batch.length - 1].id],
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
