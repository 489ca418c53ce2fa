import type pg from 'pg';
import { NotFound, WebhookPaused } from '../errors.ts';
import { ingestQuotaCte, INGEST_QUOTA_PARAMS, INGEST_RATE_HIT_CTE, ingestQuotaCheck, type IngestQuotaRow, type ProjectQuotaSource, type WebhookQuotaSource } from '../projects/quotas.ts';
import type { Runtime } from '../runtime.ts';
import type { InboundEvent } from './accept-event.ts';
import { inTransaction } from '../db/client.ts';
import { ATTEMPT_TASK, insertJobRows } from '../deliveries/enqueue.ts';

/** An event row as ingest writes it: the inbound event, with its ids and retention. */
export interface NewEvent extends InboundEvent {
  id: string;
  projectId: string;
  webhookId: string;
  payloadExpiresAt: Date | null;
  /** The webhook's config_version the caller decided on: the event is stored only while it still is (null: any). */
  configVersion: number | null;
}

/** The webhook changed since the lookup the caller decided on (config_version): nothing was stored. */
export class StaleIngestTarget extends Error {
  constructor() {
    super('the webhook changed since it was read');
  }
}

const COLUMNS = 'id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size, payload_expires_at';
const COLUMN_COUNT = 12;
/** The columns' values, then the webhook's config_version the caller read. */
const EVENT_PARAMS = COLUMN_COUNT + 1;
const params = (first: number, n = COLUMN_COUNT) => Array.from({ length: n }, (_, i) => `$${first + i}`).join(', ');
// The event row is written only while the webhook is still active, and still as the caller read
// it, so a change committed since the lookup (a pause, a new secret, a routing rule) wins
// without another round trip.
const webhookActive = (first: number) =>
  `EXISTS (SELECT 1 FROM webhooks WHERE id = $${first + 2} AND status = 'active' AND ($${first + COLUMN_COUNT}::int IS NULL OR config_version = $${first + COLUMN_COUNT}::int))`;

/** The event's delivery, written by the same statement (ingest): routed destination and first run time. */
export interface IngestDelivery {
  id: string;
  destinationId: string | null;
  destination: unknown;
  /** `scheduled`: its first attempt waits until runAt. */
  status: 'queued' | 'scheduled';
  runAt: Date | null;
}

/**
 * The delivery and its graphile-worker job, after the event (`stored` returns the event's
 * id, project and webhook): the parameters after the event's are the delivery's id,
 * destination id, destination snapshot, status, run time and the attempt task's name.
 */
const deliveryCtes = (first: number) => `, delivery AS (
  INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination_id, destination, status, next_attempt_at)
  SELECT $${first}, s.project_id, s.webhook_id, s.id, $${first + 1}, $${first + 2}, $${first + 3}, $${first + 4}::timestamptz FROM stored s
  RETURNING id, webhook_id, next_attempt_at
), job AS (
  ${insertJobRows('delivery', `$${first + 5}`)}
)`;
const DELIVERY_PARAMS = 6;

/** QUOTA_ENFORCEMENT=off: the event alone, or with its delivery. */
const INSERT_EVENT = {
  name: 'ingest_insert_event',
  text: `WITH stored AS (INSERT INTO events (${COLUMNS}) SELECT ${params(1)} WHERE ${webhookActive(1)} RETURNING id, project_id, webhook_id)
SELECT EXISTS (SELECT FROM stored) AS stored`,
};
const INSERT_EVENT_AND_DELIVERY = {
  name: 'ingest_insert_event_and_delivery',
  text: `WITH stored AS (INSERT INTO events (${COLUMNS}) SELECT ${params(1)} WHERE ${webhookActive(1)} RETURNING id, project_id, webhook_id)
${deliveryCtes(EVENT_PARAMS + 1)}
SELECT EXISTS (SELECT FROM stored) AS stored, (SELECT count(*) FROM job) AS jobs`,
};

/**
 * The quota checks and the event in one statement: the event is written only when the checks
 * admit the request (and the webhook is active); a refusal comes back with the usage the checks
 * read, to name the exceeded quota. With the delivery, the whole of an ingest is this statement.
 */
const FIRST = INGEST_QUOTA_PARAMS + 1;
const withinQuotas = (withDelivery: boolean, readCounters = true) => `WITH ${ingestQuotaCte(readCounters)}, stored AS (
  INSERT INTO events (${COLUMNS})
  SELECT ${params(FIRST)} FROM ingest_quota WHERE ingest_quota.admitted AND ${webhookActive(FIRST)}
  RETURNING id, project_id, webhook_id
), ${INGEST_RATE_HIT_CTE}${withDelivery ? deliveryCtes(FIRST + EVENT_PARAMS) : ''}
SELECT ingest_quota.admitted, ingest_quota.usage, EXISTS (SELECT FROM stored) AS stored${withDelivery ? ', (SELECT count(*) FROM job) AS jobs' : ''} FROM ingest_quota`;
const INSERT_EVENT_WITHIN_QUOTAS = { name: 'ingest_insert_event_within_quotas', text: withinQuotas(false) };
const INSERT_EVENT_AND_DELIVERY_WITHIN_QUOTAS = { name: 'ingest_insert_event_and_delivery_within_quotas', text: withinQuotas(true) };
/** The same, when the process's recent reading of the usage counters leaves ample headroom: the rate windows alone are read. */
const INSERT_EVENT_WITHIN_RATE = { name: 'ingest_insert_event_within_rate', text: withinQuotas(false, false) };
const INSERT_EVENT_AND_DELIVERY_WITHIN_RATE = { name: 'ingest_insert_event_and_delivery_within_rate', text: withinQuotas(true, false) };

function eventValues(e: NewEvent): unknown[] {
  return [e.id, e.projectId, e.webhookId, e.channel, e.method, e.path, JSON.stringify(e.query), JSON.stringify(e.headers), e.contentType, e.body, e.body.length, e.payloadExpiresAt, e.configVersion];
}

function deliveryValues(d: IngestDelivery): unknown[] {
  return [d.id, d.destinationId, JSON.stringify(d.destination), d.status, d.runAt, ATTEMPT_TASK];
}

/**
 * Stores an inbound event after the quota checks (QuotaExceeded 429/409) and only while the
 * webhook is active (409 paused, 404 gone); with `delivery`, its delivery and first job too.
 * The checks and the inserts are one statement, so the happy path costs one round trip.
 *
 * `db` is the pool or a connection in the caller's transaction. On the pool, the statement
 * commits on its own; only where small rate limits must be exact (their lock is held to the
 * end of a transaction) does it open a transaction here. In the caller's transaction: when
 * it throws, roll back.
 */
export async function storeEvent(
  rt: Pick<Runtime, 'config'>,
  db: pg.Pool | pg.PoolClient,
  event: NewEvent,
  quotas: { project: ProjectQuotaSource; webhook: WebhookQuotaSource },
  delivery?: IngestDelivery,
): Promise<void> {
  const check = ingestQuotaCheck(rt, { ...quotas, bodyBytes: event.body.length });
  const values = [...(check?.values ?? []), ...eventValues(event), ...(delivery ? deliveryValues(delivery) : [])];
  const statement = check
    ? check.readCounters
      ? delivery
        ? INSERT_EVENT_AND_DELIVERY_WITHIN_QUOTAS
        : INSERT_EVENT_WITHIN_QUOTAS
      : delivery
        ? INSERT_EVENT_AND_DELIVERY_WITHIN_RATE
        : INSERT_EVENT_WITHIN_RATE
    : delivery
      ? INSERT_EVENT_AND_DELIVERY
      : INSERT_EVENT;
  const run = async (client: pg.Pool | pg.PoolClient) => {
    const { rows } = await client.query<IngestQuotaRow & { stored: boolean }>({ ...statement, values });
    check?.enforce(rows[0]);
    if (!rows[0].stored) throw await stateNow(client, event.webhookId, event.configVersion);
  };
  if (!check?.exact) return run(db);
  if (isPoolClient(db)) {
    await check.lock(db);
    return run(db);
  }
  await inTransaction(db, async (client) => {
    await check.lock(client);
    await run(client);
  });
}

function isPoolClient(db: pg.Pool | pg.PoolClient): db is pg.PoolClient {
  return typeof (db as pg.PoolClient).release === 'function';
}

/** Why a webhook that was active at lookup no longer takes events as read. */
async function stateNow(db: pg.Pool | pg.PoolClient, webhookId: string, configVersion: number | null): Promise<Error> {
  const { rows } = await db.query<{ status: string; config_version: number }>('SELECT status, config_version FROM webhooks WHERE id = $1', [webhookId]);
  const now = rows[0];
  if (now && configVersion !== null && now.config_version !== configVersion) return new StaleIngestTarget();
  return now?.status === 'paused' ? new WebhookPaused() : new NotFound('webhook');
}
