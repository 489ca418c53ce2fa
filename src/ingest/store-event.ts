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
const EVENT_COLUMNS = ['id', 'project_id', 'webhook_id', 'channel', 'method', 'path', 'query', 'headers', 'content_type', 'body', 'body_size', 'source_body', 'source_content_type', 'payload_expires_at'] as const;
/** Casts for columns whose value may be null (nothing else in the statement types the parameter). */
const EVENT_CASTS: Partial<Record<(typeof EVENT_COLUMNS)[number], string>> = { source_body: 'bytea', source_content_type: 'text' };
/** The name of the event insert, which later parts of the statement read (delivery, rate-window hit). */
const STORED = 'stored';

/** The name of the deduplication claim, which the event insert waits on when the webhook dedupes. */
const CLAIM = 'claim';
const NOW_UTC = "(now() AT TIME ZONE 'UTC')";

/**
 * The event insert: written only while the webhook is still active, and still as the caller read
 * it (`event_config_version`), so a change committed since the lookup (a pause, a new secret, a
 * routing rule) wins without another round trip. `source` gates it (the quota checks' row).
 *
 * With `dedupe`, the provider's delivery id is claimed first, under the same gates, in
 * inbound_dedupe (primary key: webhook and key, so two API processes cannot both claim it; an
 * expired claim is taken over), and the event is written only when the claim is this request's.
 */
function eventInsert(p: NamedParams, source?: { from: string; where: string }, dedupe = false): string {
  const values = EVENT_COLUMNS.map((c) => p.$(`event_${c}`, EVENT_CASTS[c])).join(', ');
  const webhookId = p.$('event_webhook_id');
  const version = p.$('event_config_version', 'int');
  const webhookActive = `EXISTS (SELECT 1 FROM webhooks WHERE id = ${webhookId} AND status = 'active' AND (${version} IS NULL OR config_version = ${version}))`;
  const gates = `${source ? ` FROM ${source.from} WHERE ${source.where} AND` : ' WHERE'} ${webhookActive}`;
  const claim = dedupe
    ? `${CLAIM} AS (
  INSERT INTO inbound_dedupe (webhook_id, key, event_id, delivery_id, expires_at)
  SELECT ${webhookId}, ${p.$('dedupe_key')}, ${p.$('event_id')}, ${p.$('dedupe_delivery_id')}, ${NOW_UTC} + make_interval(secs => ${p.$('dedupe_window_seconds', 'int')})${gates}
  ON CONFLICT (webhook_id, key) DO UPDATE SET event_id = EXCLUDED.event_id, delivery_id = EXCLUDED.delivery_id, expires_at = EXCLUDED.expires_at
   WHERE inbound_dedupe.expires_at <= ${NOW_UTC}
  RETURNING 1
), `
    : '';
  return `${claim}${STORED} AS (
  INSERT INTO events (${EVENT_COLUMNS.join(', ')})
  SELECT ${values}${gates}${dedupe ? ` AND EXISTS (SELECT FROM ${CLAIM})` : ''}
  RETURNING id, project_id, webhook_id
)`;
}

/** The claim that made this request a duplicate, as committed before the statement began (null: none seen). */
const duplicateOf = (p: NamedParams) => `(SELECT json_build_object('eventId', event_id, 'deliveryId', delivery_id) FROM inbound_dedupe
  WHERE webhook_id = ${p.$('event_webhook_id')} AND key = ${p.$('dedupe_key')} AND expires_at > ${NOW_UTC}) AS duplicate_of`;

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
const insertEventAndDelivery = (dedupe: boolean) => (p: NamedParams) => `WITH ${eventInsert(p, undefined, dedupe)}
${deliveryCtes(p)}
SELECT EXISTS (SELECT FROM ${STORED}) AS stored, (SELECT count(*) FROM job) AS jobs${dedupe ? `, ${duplicateOf(p)}` : ''}`;
const INSERT_EVENT_AND_DELIVERY = statement('ingest_insert_event_and_delivery', insertEventAndDelivery(false));

/**
 * The quota checks and the event in one statement: the event is written only when the checks
 * admit the request (and the webhook is active); a refusal comes back with the usage the checks
 * read, to name the exceeded quota. With the delivery, the whole of an ingest is this statement.
 */
const withinQuotas = (withDelivery: boolean, readCounters = true, dedupe = false) => (p: NamedParams) => `WITH ${ingestQuotaCte(p, readCounters)},
${eventInsert(p, { from: 'ingest_quota', where: 'ingest_quota.admitted' }, dedupe)}, ${ingestRateHitCte(STORED)}${withDelivery ? deliveryCtes(p) : ''}
SELECT ingest_quota.admitted, ingest_quota.usage, EXISTS (SELECT FROM ${STORED}) AS stored${withDelivery ? ', (SELECT count(*) FROM job) AS jobs' : ''}${dedupe ? `, ${duplicateOf(p)}` : ''} FROM ingest_quota`;
const INSERT_EVENT_WITHIN_QUOTAS = statement('ingest_insert_event_within_quotas', withinQuotas(false));
const INSERT_EVENT_AND_DELIVERY_WITHIN_QUOTAS = statement('ingest_insert_event_and_delivery_within_quotas', withinQuotas(true));
/** The same, when the process's recent reading of the usage counters leaves ample headroom: the rate windows alone are read. */
const INSERT_EVENT_WITHIN_RATE = statement('ingest_insert_event_within_rate', withinQuotas(false, false));
const INSERT_EVENT_AND_DELIVERY_WITHIN_RATE = statement('ingest_insert_event_and_delivery_within_rate', withinQuotas(true, false));
/** The same three with the delivery, when the webhook dedupes by the provider's delivery id. */
const DEDUPED = {
  none: statement('ingest_insert_event_and_delivery_dedupe', insertEventAndDelivery(true)),
  quotas: statement('ingest_insert_event_and_delivery_within_quotas_dedupe', withinQuotas(true, true, true)),
  rate: statement('ingest_insert_event_and_delivery_within_rate_dedupe', withinQuotas(true, false, true)),
};

/** Inbound deduplication: the key (provider, event type, delivery id) and the webhook's window. */
export interface IngestDedupe {
  key: string;
  windowSeconds: number;
}

/** The accepted event a duplicate repeats. */
export interface DuplicateOf {
  eventId: string;
  deliveryId: string;
}

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
    event_source_body: e.source?.body ?? null,
    event_source_content_type: e.source?.contentType ?? null,
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
  dedupe?: IngestDedupe,
): Promise<DuplicateOf | null> {
  // stored_payload_bytes grows by the body and the kept source (the usage triggers count both).
  const check = ingestQuotaCheck(rt, { ...quotas, bodyBytes: event.body.length + (event.source?.body.length ?? 0), ingestRate: countsTowardIngestRate(event.channel) });
  const dedupeValues = dedupe && delivery ? { dedupe_key: dedupe.key, dedupe_delivery_id: delivery.id, dedupe_window_seconds: dedupe.windowSeconds } : null;
  const values = { ...check?.values, ...eventValues(event), ...(delivery ? deliveryValues(delivery) : {}), ...dedupeValues };
  const chosen = dedupeValues
    ? DEDUPED[check ? (check.readCounters ? 'quotas' : 'rate') : 'none']
    : check
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
  const run = async (client: pg.Pool | pg.PoolClient): Promise<DuplicateOf | null> => {
    const { rows } = await client.query<IngestQuotaRow & { stored: boolean; duplicate_of?: DuplicateOf | null }>({ name: chosen.name, text: chosen.text, values: chosen.params.bind(values) });
    check?.enforce(rows[0]);
    if (rows[0].stored) return null;
    if (rows[0].duplicate_of) return rows[0].duplicate_of;
    // A claim committed by another process while this statement waited on it is not in the
    // statement's snapshot: read it now.
    if (dedupeValues) {
      const again = await client.query<DuplicateOf>(
        `SELECT event_id AS "eventId", delivery_id AS "deliveryId" FROM inbound_dedupe WHERE webhook_id = $1 AND key = $2 AND expires_at > ${NOW_UTC}`,
        [event.webhookId, dedupeValues.dedupe_key],
      );
      if (again.rows[0]) return again.rows[0];
    }
    throw await stateNow(client, event.webhookId, event.configVersion);
  };
  if (!check?.exact) return run(db);
  if (isPoolClient(db)) {
    await check.lock(db);
    return run(db);
  }
  return inTransaction(db, async (client) => {
    await check.lock(client);
    return run(client);
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
