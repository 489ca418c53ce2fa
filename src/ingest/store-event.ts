import type pg from 'pg';
import { NotFound, WebhookPaused } from '../errors.ts';
import { INGEST_QUOTA_CTE, INGEST_QUOTA_PARAMS, ingestQuotaCheck, type IngestQuotaRow, type ProjectQuotaSource, type WebhookQuotaSource } from '../projects/quotas.ts';
import type { Runtime } from '../runtime.ts';

/** An event row as ingest writes it. */
export interface NewEvent {
  id: string;
  projectId: string;
  webhookId: string;
  channel: string;
  method: string | null;
  path: string | null;
  query: Record<string, unknown>;
  /** Lower-case names, credentials already removed. */
  headers: Record<string, unknown>;
  contentType: string | null;
  body: Buffer;
  payloadExpiresAt: Date | null;
}

const COLUMNS = 'id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size, payload_expires_at';
const params = (first: number) => Array.from({ length: 12 }, (_, i) => `$${first + i}`).join(', ');
// The event row is written only while the webhook is still active, so a pause or archive
// committed since the lookup wins without another round trip.
const webhookActive = (first: number) => `EXISTS (SELECT 1 FROM webhooks WHERE id = $${first + 2} AND status = 'active')`;

/** QUOTA_ENFORCEMENT=off: the event alone. */
const INSERT_EVENT = {
  name: 'ingest_insert_event',
  text: `INSERT INTO events (${COLUMNS}) SELECT ${params(1)} WHERE ${webhookActive(1)}`,
};

/**
 * The quota checks and the event in one statement: the event is written only when the checks
 * admit the request (and the webhook is active); a refusal comes back with the usage the checks
 * read, to name the exceeded quota.
 */
const FIRST = INGEST_QUOTA_PARAMS + 1;
const INSERT_EVENT_WITHIN_QUOTAS = {
  name: 'ingest_insert_event_within_quotas',
  text: `WITH ${INGEST_QUOTA_CTE}, stored AS (
  INSERT INTO events (${COLUMNS})
  SELECT ${params(FIRST)} FROM ingest_quota WHERE ingest_quota.admitted AND ${webhookActive(FIRST)}
  RETURNING 1
)
SELECT ingest_quota.admitted, ingest_quota.usage, EXISTS (SELECT FROM stored) AS stored FROM ingest_quota`,
};

function eventValues(e: NewEvent): unknown[] {
  return [e.id, e.projectId, e.webhookId, e.channel, e.method, e.path, JSON.stringify(e.query), JSON.stringify(e.headers), e.contentType, e.body, e.body.length, e.payloadExpiresAt];
}

/**
 * Stores an inbound event inside the ingest transaction (`client`), after the quota checks
 * (QuotaExceeded 429/409) and only while the webhook is active (409 paused, 404 gone). The
 * checks and the insert are one statement, so the happy path costs no extra round trip
 * (small rate limits first take their lock). When it throws, roll back.
 */
export async function storeEvent(rt: Pick<Runtime, 'config'>, client: pg.PoolClient, event: NewEvent, quotas: { project: ProjectQuotaSource; webhook: WebhookQuotaSource }): Promise<void> {
  const check = ingestQuotaCheck(rt, { ...quotas, bodyBytes: event.body.length });
  let stored: boolean;
  if (!check) {
    stored = ((await client.query({ ...INSERT_EVENT, values: eventValues(event) })).rowCount ?? 0) > 0;
  } else {
    await check.lock(client);
    const { rows } = await client.query<IngestQuotaRow & { stored: boolean }>({ ...INSERT_EVENT_WITHIN_QUOTAS, values: [...check.values, ...eventValues(event)] });
    check.enforce(rows[0]);
    stored = rows[0].stored;
  }
  if (!stored) throw await stateNow(client, event.webhookId);
}

/** Why a webhook that was active at lookup no longer takes events. */
async function stateNow(client: pg.PoolClient, webhookId: string): Promise<Error> {
  const { rows } = await client.query<{ status: string }>('SELECT status FROM webhooks WHERE id = $1', [webhookId]);
  return rows[0]?.status === 'paused' ? new WebhookPaused() : new NotFound('webhook');
}
