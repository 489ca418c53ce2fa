import type pg from 'pg';
import { NotFound, WebhookPaused } from '../errors.ts';
import { NamedParams } from '../db/named-params.ts';
import { ingestQuotaCheck, ingestQuotaCte, ingestRateHitCte, type IngestQuotaRow } from '../projects/quotas/ingest-check.ts';
import type { ProjectQuotaSource, WebhookQuotaSource } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { countsTowardIngestRate, type InboundEvent } from './inbound-event.ts';
import { inTransaction } from '../db/client.ts';
import { ATTEMPT_TASK, insertAttemptJobRows } from '../deliveries/job.ts';

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

/** The event row's columns, each bound as the statement parameter `event_<column>`. */
const EVENT_COLUMNS = ['id', 'project_id', 'webhook_id', 'channel', 'method', 'path', 'query', 'headers', 'content_type', 'body', 'body_size', 'payload_expires_at'] as const;
/** The name of the event insert, which later parts of the statement read (delivery, rate-window hit). */
const STORED = 'stored';

/**
 * The event insert: written only while the webhook is still active, and still as the caller read
 * it (`event_config_version`), so a change committed since the lookup (a pause, a new secret, a
 * routing rule) wins without another round trip. `source` gates it (the quota checks' row).
 */
function eventInsert(p: NamedParams, source?: { from: string; where: string }): string {
  const values = EVENT_COLUMNS.map((c) => p.$(`event_${c}`)).join(', ');
  const webhookId = p.$('event_webhook_id');
  const version = p.$('event_config_version', 'int');
  const webhookActive = `EXISTS (SELECT 1 FROM webhooks WHERE id = ${webhookId} AND status = 'active' AND (${version} IS NULL OR config_version = ${version}))`;
  return `${STORED} AS (
  INSERT INTO events (${EVENT_COLUMNS.join(', ')})
  SELECT ${values}${source ? ` FROM ${source.from} WHERE ${source.where} AND` : ' WHERE'} ${webhookActive}
  RETURNING id, project_id, webhook_id
)`;
}

/** The event's delivery, written by the same statement (ingest): routed destination and first run time. */
export interface IngestDelivery {
  id: string;
  destinationId: string | null;
  destination: unknown;
  /** `scheduled`: its first attempt waits until runAt. */
  status: 'queued' | 'scheduled';
  runAt: Date | null;
}

/** The delivery and its graphile-worker job, after the event insert (STORED returns the event's id, project and webhook). */
const deliveryCtes = (p: NamedParams) => `, delivery AS (
  INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination_id, destination, status, next_attempt_at)
  SELECT ${p.$('delivery_id')}, s.project_id, s.webhook_id, s.id, ${p.$('delivery_destination_id')}, ${p.$('delivery_destination')}, ${p.$('delivery_status')},
         ${p.$('delivery_run_at', 'timestamptz')} FROM ${STORED} s
  RETURNING id, webhook_id, next_attempt_at
), job AS (
  ${insertAttemptJobRows('delivery', p.$('attempt_task'))}
)`;

interface IngestStatement {
  name: string;
  text: string;
  params: NamedParams;
}

function statement(name: string, build: (p: NamedParams) => string): IngestStatement {
  const params = new NamedParams();
  return { name, text: build(params), params };
}

/** QUOTA_ENFORCEMENT=off: the event alone, or with its delivery. */
const INSERT_EVENT = statement('ingest_insert_event', (p) => `WITH ${eventInsert(p)}
SELECT EXISTS (SELECT FROM ${STORED}) AS stored`);
const INSERT_EVENT_AND_DELIVERY = statement('ingest_insert_event_and_delivery', (p) => `WITH ${eventInsert(p)}
${deliveryCtes(p)}
SELECT EXISTS (SELECT FROM ${STORED}) AS stored, (SELECT count(*) FROM job) AS jobs`);

/**
 * The quota checks and the event in one statement: the event is written only when the checks
 * admit the request (and the webhook is active); a refusal comes back with the usage the checks
 * read, to name the exceeded quota. With the delivery, the whole of an ingest is this statement.
 */
const withinQuotas = (withDelivery: boolean, readCounters = true) => (p: NamedParams) => `WITH ${ingestQuotaCte(p, readCounters)},
${eventInsert(p, { from: 'ingest_quota', where: 'ingest_quota.admitted' })}, ${ingestRateHitCte(STORED)}${withDelivery ? deliveryCtes(p) : ''}
SELECT ingest_quota.admitted, ingest_quota.usage, EXISTS (SELECT FROM ${STORED}) AS stored${withDelivery ? ', (SELECT count(*) FROM job) AS jobs' : ''} FROM ingest_quota`;
const INSERT_EVENT_WITHIN_QUOTAS = statement('ingest_insert_event_within_quotas', withinQuotas(false));
const INSERT_EVENT_AND_DELIVERY_WITHIN_QUOTAS = statement('ingest_insert_event_and_delivery_within_quotas', withinQuotas(true));
/** The same, when the process's recent reading of the usage counters leaves ample headroom: the rate windows alone are read. */
const INSERT_EVENT_WITHIN_RATE = statement('ingest_insert_event_within_rate', withinQuotas(false, false));
const INSERT_EVENT_AND_DELIVERY_WITHIN_RATE = statement('ingest_insert_event_and_delivery_within_rate', withinQuotas(true, false));

function eventValues(e: NewEvent): Record<string, unknown> {
  return {
    event_id: e.id,
    event_project_id: e.projectId,
    event_webhook_id: e.webhookId,
    event_channel: e.channel,
    event_method: e.method,
    event_path: e.path,
    event_query: JSON.stringify(e.query),
    event_headers: JSON.stringify(e.headers),
    event_content_type: e.contentType,
    event_body: e.body,
    event_body_size: e.body.length,
    event_payload_expires_at: e.payloadExpiresAt,
    event_config_version: e.configVersion,
  };
}

function deliveryValues(d: IngestDelivery): Record<string, unknown> {
  return {
    delivery_id: d.id,
    delivery_destination_id: d.destinationId,
    delivery_destination: JSON.stringify(d.destination),
    delivery_status: d.status,
    delivery_run_at: d.runAt,
    attempt_task: ATTEMPT_TASK,
  };
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
  const check = ingestQuotaCheck(rt, { ...quotas, bodyBytes: event.body.length, ingestRate: countsTowardIngestRate(event.channel) });
  const values = { ...check?.values, ...eventValues(event), ...(delivery ? deliveryValues(delivery) : {}) };
  const chosen = check
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
    const { rows } = await client.query<IngestQuotaRow & { stored: boolean }>({ name: chosen.name, text: chosen.text, values: chosen.params.bind(values) });
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
