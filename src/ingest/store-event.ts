import type pg from 'pg';
import { IdempotencyKeyInProgress, IdempotencyKeyReused, NotFound, WebhookPaused } from '../errors.ts';
import { NamedParams } from '../db/named-params.ts';
import { ingestQuotaCheck, ingestQuotaCte, ingestRateHitCte, type IngestQuotaRow } from '../projects/quotas/ingest-check.ts';
import type { ProjectQuotaSource, WebhookQuotaSource } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { countsTowardIngestRate, type InboundEvent } from './inbound-event.ts';
import { inTransaction } from '../db/client.ts';
import { ingestBatches, webhookTakesEvents, type BatchRow } from './store-batch.ts';
import { insertDeliveryCtes } from '../deliveries/enqueue.ts';
import { deliveryListenedSql } from '../deliveries/listeners.ts';
import { ATTEMPT_TASK } from '../deliveries/job.ts';
import { fileRowsCte, fileRowsValues } from '../files/service.ts';
import { ingestCounts, ingestedCountCte } from '../metrics/ingest-counts.ts';
import { FILE_STORAGE_FITS, fileStorageCheck, fileStorageCheckCte, fileStorageCountCte, fileStorageCountValues, type FileStorageRow } from '../projects/quotas/file-storage.ts';

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
/** The name of the idempotency key's claim, which the dedupe claim and the event insert wait on. */
const KEY_CLAIM = 'key_claim';
const NOW_UTC = "(now() AT TIME ZONE 'UTC')";

/**
 * The event insert: written only while the webhook is still active, and still as the caller read
 * it (`event_config_version`), so a change committed since the lookup (a pause, a new secret, a
 * routing rule) wins without another round trip. `source` gates it (the quota checks' row).
 *
 * With `dedupe`, the provider's delivery id is claimed first, under the same gates, in
 * inbound_dedupe (primary key: webhook and key, so two API processes cannot both claim it; an
 * expired claim is taken over), and the event is written only when the claim is this request's.
 * With `idempotent`, the producer's idempotency key is claimed the same way before it, in
 * ingest_idempotency_keys (with the fingerprint of the body, to tell a retry from a reuse).
 */
function eventInsert(p: NamedParams, source?: { from: string; where: string }, dedupe = false, filesFit = false, idempotent = false): string {
  const values = EVENT_COLUMNS.map((c) => p.$(`event_${c}`, EVENT_CASTS[c])).join(', ');
  const webhookId = p.$('event_webhook_id');
  const version = p.$('event_config_version', 'int');
  const webhookActive = webhookTakesEvents(webhookId, version);
  // With files: only when they fit the file-storage quota (fileStorageCheckCte).
  const fits = filesFit ? `${FILE_STORAGE_FITS} AND ` : '';
  const gates = `${source ? ` FROM ${source.from} WHERE ${source.where} AND` : ' WHERE'} ${fits}${webhookActive}`;
  // The idempotency key is claimed first (CONTRACT §12: it runs before the provider's dedupe).
  const keyClaim = idempotent
    ? `${KEY_CLAIM} AS (
  INSERT INTO ingest_idempotency_keys (project_id, webhook_id, key, fingerprint, event_id, delivery_id, expires_at)
  SELECT ${p.$('event_project_id')}, ${webhookId}, ${p.$('idem_key')}, ${p.$('idem_fingerprint')}, ${p.$('event_id')}, ${p.$('delivery_id')},
         ${NOW_UTC} + make_interval(secs => ${p.$('idem_window_seconds', 'int')})${gates}
  ON CONFLICT (webhook_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, event_id = EXCLUDED.event_id, delivery_id = EXCLUDED.delivery_id, expires_at = EXCLUDED.expires_at
   WHERE ingest_idempotency_keys.expires_at <= ${NOW_UTC}
  RETURNING 1
), `
    : '';
  const afterKey = idempotent ? ` AND EXISTS (SELECT FROM ${KEY_CLAIM})` : '';
  const claim = dedupe
    ? `${CLAIM} AS (
  INSERT INTO inbound_dedupe (project_id, webhook_id, key, event_id, delivery_id, expires_at)
  SELECT ${p.$('event_project_id')}, ${webhookId}, ${p.$('dedupe_key')}, ${p.$('event_id')}, ${p.$('dedupe_delivery_id')}, ${NOW_UTC} + make_interval(secs => ${p.$('dedupe_window_seconds', 'int')})${gates}${afterKey}
  ON CONFLICT (webhook_id, key) DO UPDATE SET event_id = EXCLUDED.event_id, delivery_id = EXCLUDED.delivery_id, expires_at = EXCLUDED.expires_at
   WHERE inbound_dedupe.expires_at <= ${NOW_UTC}
  RETURNING 1
), `
    : '';
  return `${keyClaim}${claim}${STORED} AS (
  INSERT INTO events (${EVENT_COLUMNS.join(', ')})
  SELECT ${values}${gates}${afterKey}${dedupe ? ` AND EXISTS (SELECT FROM ${CLAIM})` : ''}
  RETURNING id, project_id, webhook_id, received_at
)`;
}

/**
 * The claim that made this request a duplicate, as committed before the statement began (null:
 * none seen). Only while the webhook is still as the caller read it: a claim answers for the
 * window the caller decided on, and a window changed since (to 0, or shorter) is decided again on
 * a fresh lookup (StaleIngestTarget), never answered from the old one.
 */
const duplicateOf = (p: NamedParams) => {
  const version = p.$('event_config_version', 'int');
  return `CASE WHEN ${version} IS NULL OR EXISTS (SELECT 1 FROM webhooks WHERE id = ${p.$('event_webhook_id')} AND config_version = ${version}) THEN
  (SELECT json_build_object('eventId', event_id, 'deliveryId', delivery_id) FROM inbound_dedupe
    WHERE webhook_id = ${p.$('event_webhook_id')} AND key = ${p.$('dedupe_key')} AND expires_at > ${NOW_UTC}) END AS duplicate_of`;
};

/**
 * The accepted request that holds the idempotency key, as committed before the statement began,
 * with its fingerprint (null: none seen); only while the webhook is still as the caller read it.
 */
const keyHolder = (p: NamedParams) => {
  const version = p.$('event_config_version', 'int');
  return `CASE WHEN ${version} IS NULL OR EXISTS (SELECT 1 FROM webhooks WHERE id = ${p.$('event_webhook_id')} AND config_version = ${version}) THEN
  (SELECT json_build_object('eventId', event_id, 'deliveryId', delivery_id, 'fingerprint', fingerprint) FROM ingest_idempotency_keys
    WHERE webhook_id = ${p.$('event_webhook_id')} AND key = ${p.$('idem_key')} AND expires_at > ${NOW_UTC}) END AS key_holder`;
};

/** The event's delivery, written by the same statement (ingest): routed destination and first run time. */
export interface IngestDelivery {
  id: string;
  destinationId: string | null;
  destination: unknown;
  /** `scheduled`: its first attempt waits until runAt. `delivering`: claimed as it is written (`claim`). */
  status: 'queued' | 'scheduled' | 'delivering';
  runAt: Date | null;
  /** The producer's idempotency key, shown on the delivery (null: none). */
  idempotencyKey?: string | null;
  /**
   * False: written without its job, for a drain running in this process to take over once the
   * statement committed (RunnerWakeUp.drainRunning). Default true.
   */
  job?: boolean;
  /**
   * Claimed for a drain running in this process as it is written (status `delivering`, without a
   * job: RunnerWakeUp.claimDirect): its first attempt, under the drain's slot lease, its claim
   * held `leaseMs`. Once stored, `stored` says when the event was received and whether anyone
   * listens to the project's deliveryUpdated (the drain then sends its `delivering` change).
   */
  claim?: { leaseId: string; leaseMs: number; stored?: { receivedAt: Date; listened: boolean } };
}

/**
 * The delivery and (with `job`) its graphile-worker job, after the event insert (STORED returns the
 * event's id, project and webhook); `claimed`: written as its first attempt's claim (IngestDelivery.claim).
 */
const deliveryCtes = (p: NamedParams, job: boolean, claimed: boolean) =>
  insertDeliveryCtes(
    'delivery',
    {
      id: p.$('delivery_id'),
      projectId: 's.project_id',
      webhookId: 's.webhook_id',
      eventId: 's.id',
      destinationId: p.$('delivery_destination_id'),
      destination: p.$('delivery_destination'),
      status: p.$('delivery_status'),
      nextAttemptAt: p.$('delivery_run_at', 'timestamptz'),
      idempotencyKey: p.$('delivery_idempotency_key', 'text'),
      ...(claimed
        ? { attempts: '1', leaseUntil: `now() + make_interval(secs => ${p.$('delivery_lease_ms', 'int')}::float8 / 1000)`, slotLease: p.$('delivery_slot_lease', 'text') }
        : {}),
    },
    job ? p.$('attempt_task') : null,
    `${STORED} s`,
  );

interface IngestStatement {
  name: string;
  text: string;
  params: NamedParams;
}

/** What one ingest statement does, beside storing the event. */
interface StatementShape {
  /** The quota checks: none (QUOTA_ENFORCEMENT=off), with the usage counters read, or the rate windows alone (see ingestQuotaCheck). */
  quotas: 'none' | 'quotas' | 'rate';
  /** The delivery. */
  delivery: boolean;
  /** Its job too (see IngestDelivery.job). */
  job: boolean;
  /** Claimed as it is written, without a job (see IngestDelivery.claim). */
  claimed: boolean;
  /** The provider's delivery id claimed first (only with the delivery). */
  dedupe: boolean;
  /** The producer's idempotency key claimed first of all (only with the delivery). */
  idempotent: boolean;
  /** Files recorded with the event: none, counted, or checked against file_storage_bytes and counted. */
  files: 'none' | 'count' | 'checked';
  /** The event counted in the metrics roll-ups by the statement (in a caller's transaction), rather than by this process once committed. */
  counted: boolean;
}

/**
 * The statement of a shape, e.g. `ingest_insert_event_and_delivery_within_quotas`: the quota
 * checks and the file-storage check gate the event insert (a refusal comes back with the usage
 * they read, to name the exceeded quota); the delivery, its job, the rate-window hit and the
 * file rows and their bytes follow the event insert. The whole of an ingest is this statement.
 */
function buildStatement(shape: StatementShape): IngestStatement {
  const { quotas, delivery, dedupe, files, idempotent, counted } = shape;
  const job = delivery && shape.job;
  const claimed = delivery && !job && shape.claimed;
  const full = `ingest_insert_event${delivery ? '_and_delivery' : ''}${quotas === 'none' ? '' : `_within_${quotas}`}${idempotent ? '_idem' : ''}${dedupe ? '_dedupe' : ''}${files === 'none' ? '' : `_files_${files}`}${claimed ? '_claimed' : delivery && !job ? '_nojob' : ''}${counted ? '_counted' : ''}`;
  // PostgreSQL keeps 63 characters of a statement name: the longest shapes say less.
  const name = full.length <= 63 ? full : full.replace(/_insert_event_and_delivery(_within)?/, '_event_delivery');
  if (name.length > 63) throw new Error(`ingest statement name too long: ${name}`);
  const params = new NamedParams();
  const p = params;
  const ctes: string[] = [];
  if (quotas !== 'none') ctes.push(ingestQuotaCte(p, quotas === 'quotas'));
  if (files === 'checked') ctes.push(fileStorageCheckCte(p));
  ctes.push(eventInsert(p, quotas === 'none' ? undefined : { from: 'ingest_quota', where: 'ingest_quota.admitted' }, dedupe, files === 'checked', idempotent));
  if (quotas !== 'none') ctes.push(ingestRateHitCte(STORED));
  if (delivery) ctes.push(deliveryCtes(p, job, claimed));
  if (files !== 'none') ctes.push(fileRowsCte(p, STORED), fileStorageCountCte(p, STORED));
  if (counted) ctes.push(ingestedCountCte('counted', STORED));
  const columns = [
    ...(quotas === 'none' ? [] : ['ingest_quota.admitted', 'ingest_quota.usage']),
    `EXISTS (SELECT FROM ${STORED}) AS stored`,
    ...(job ? ['(SELECT count(*) FROM job) AS jobs'] : []),
    ...(claimed ? [`(SELECT received_at FROM ${STORED}) AS received_at`, `${deliveryListenedSql(p.$('event_project_id'))} AS listened`] : []),
    ...(idempotent ? [keyHolder(p), `EXISTS (SELECT FROM ${KEY_CLAIM}) AS key_claimed`] : []),
    ...(dedupe ? [duplicateOf(p)] : []),
    ...(files === 'checked' ? [`${FILE_STORAGE_FITS} AS files_fit`, '(SELECT usage FROM file_quota) AS file_usage'] : []),
  ];
  const text = `WITH ${ctes.join(',\n')}
SELECT ${columns.join(', ')}${quotas === 'none' ? '' : ' FROM ingest_quota'}`;
  return { name, text, params };
}

const statements = new Map<string, IngestStatement>();

/** The statement of a shape, built once (its text stays the same, so the prepared statement keeps its plan). */
function statementFor(shape: StatementShape): IngestStatement {
  const key = `${shape.quotas} ${shape.delivery} ${shape.job} ${shape.claimed} ${shape.dedupe} ${shape.files} ${shape.idempotent} ${shape.counted}`;
  let s = statements.get(key);
  if (!s) statements.set(key, (s = buildStatement(shape)));
  return s;
}

/** Inbound deduplication: the key (provider, event type, delivery id) and the webhook's window. */
export interface IngestDedupe {
  key: string;
  windowSeconds: number;
}

/**
 * The producer's idempotency key (CONTRACT §12), with the fingerprint of "the same body" and the
 * webhook's window: claimed by the statement when the window is on (a retry answers the first
 * request's ids, another body 422); recorded on the delivery either way.
 */
export interface IngestIdempotency {
  key: string;
  fingerprint: string;
  /** 0: recorded on the delivery, never enforced. */
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
    delivery_idempotency_key: d.idempotencyKey ?? null,
    attempt_task: ATTEMPT_TASK,
    ...(d.claim ? { delivery_lease_ms: d.claim.leaseMs, delivery_slot_lease: d.claim.leaseId } : {}),
  };
}

/**
 * Stores an inbound event after the quota checks (QuotaExceeded 429/409) and only while the
 * webhook is active (409 paused, 404 gone); with `delivery`, its delivery and first job too.
 * The checks and the inserts are one statement, so the happy path costs one round trip; on the
 * pool, an event with nothing of its own to claim or check exactly may share that statement with
 * others of its webhook (store-batch.ts), with the same answer. `origin`: the connection of its request.
 *
 * With `idempotency` (its window on), the key is claimed in the same statement, before the
 * quotas count: a key already held answers the holder's ids (a duplicate: nothing stored, no
 * quota charged) or 422 for another body, whatever the quotas or the webhook's pause say.
 *
 * `db` is the pool or a connection in the caller's transaction. On the pool, the statement
 * commits on its own; only where small rate limits must be exact (their lock is held to the
 * end of a transaction), or where a key and a dedupe id are both claimed, does it open a
 * transaction here. In the caller's transaction: when it throws, roll back.
 *
 * A stored event counts in its webhook's metrics (`ingested`): in the caller's transaction, by the
 * statement itself; else by this process once committed (src/metrics/ingest-counts.ts).
 */
export async function storeEvent(
  rt: Pick<Runtime, 'config' | 'db'>,
  db: pg.Pool | pg.PoolClient,
  event: NewEvent,
  quotas: { project: ProjectQuotaSource; webhook: WebhookQuotaSource },
  delivery?: IngestDelivery,
  dedupe?: IngestDedupe,
  idempotency?: IngestIdempotency,
  origin?: object,
): Promise<DuplicateOf | null> {
  // stored_payload_bytes grows by the body and the kept source (the usage triggers count both).
  const check = ingestQuotaCheck(rt, { ...quotas, bodyBytes: event.body.length + (event.source?.body.length ?? 0), ingestRate: countsTowardIngestRate(event.channel) });
  const dedupeValues = dedupe && delivery ? { dedupe_key: dedupe.key, dedupe_delivery_id: delivery.id, dedupe_window_seconds: dedupe.windowSeconds } : null;
  const key = idempotency && delivery && idempotency.windowSeconds > 0 ? idempotency : null;
  const keyValues = key ? { idem_key: key.key, idem_fingerprint: key.fingerprint, idem_window_seconds: key.windowSeconds } : null;
  const values = { ...check?.values, ...eventValues(event), ...(delivery ? deliveryValues(delivery) : {}), ...dedupeValues, ...keyValues };
  const files = event.files?.rows.length ? event.files : null;
  const fileBytes = files ? files.rows.reduce((n, f) => n + f.size, 0) : 0;
  // Without the ingest checks' quota lock, far from the file quota a moment ago: only counted (see fileStorageCheck).
  const fileCheck = files ? fileStorageCheck(rt, { ...quotas, bytes: fileBytes }, { countOnly: !check?.exact }) : null;
  const chosen = statementFor({
    quotas: check ? (check.readCounters ? 'quotas' : 'rate') : 'none',
    delivery: delivery !== undefined,
    job: delivery?.job !== false,
    claimed: delivery?.claim !== undefined,
    dedupe: dedupeValues !== null,
    idempotent: key !== null,
    files: files ? (fileCheck ? 'checked' : 'count') : 'none',
    counted: isPoolClient(db),
  });
  if (files) {
    Object.assign(values, fileRowsValues(files), fileCheck?.values ?? fileStorageCountValues({ projectId: quotas.project.id, webhookId: quotas.webhook.id, bytes: fileBytes }));
  }
  /** The key's holder answers: a retry of the same body is a duplicate of it, another body 422. */
  const held = (holder: KeyHolder): DuplicateOf => {
    if (holder.fingerprint !== key!.fingerprint) throw new IdempotencyKeyReused();
    return { eventId: holder.eventId, deliveryId: holder.deliveryId };
  };
  type Row = IngestQuotaRow &
    FileStorageRow & { stored: boolean; duplicate_of?: DuplicateOf | null; key_holder?: KeyHolder | null; key_claimed?: boolean; received_at?: Date; listened?: boolean };
  const run = async (client: pg.Pool | pg.PoolClient): Promise<DuplicateOf | null> => {
    const { rows } = await client.query<Row>({ name: chosen.name, text: chosen.text, values: chosen.params.bind(values) });
    const row = rows[0];
    if (row.stored) {
      check?.enforce(row);
      fileCheck?.enforce(row);
      if (delivery?.claim) delivery.claim.stored = { receivedAt: row.received_at!, listened: row.listened === true };
      return null;
    }
    // The key first: before the quotas and the webhook's state (CONTRACT §12's order of checks).
    if (row.key_holder) return held(row.key_holder);
    // Refused by a quota: unless a request with the key committed since the statement began.
    if (key && check && !row.admitted) {
      const now = await heldNow(client, event, key.key, null);
      if (now.current && now.holder) return held(now.holder);
      // Then the pause (or a change since the lookup) before the quotas, as without a key.
      if (!now.current || now.status !== 'active') throw stateError(now.webhook, event.configVersion);
    }
    check?.enforce(row);
    if (row.duplicate_of) {
      // The key (claimed) answers from now on as the provider's dedupe did (one transaction: see below).
      if (row.key_claimed) await pointKeyAt(client, event.webhookId, key!.key, row.duplicate_of);
      return row.duplicate_of;
    }
    // Files that do not fit (409 file_storage_bytes), nothing stored: unless the webhook changed
    // meanwhile, whose state (or a fresh decision) comes first, as when files were checked after the event.
    if (fileCheck && row.files_fit === false) {
      const now = await webhookNow(client, event.webhookId);
      if (now?.status === 'active' && (event.configVersion === null || now.config_version === event.configVersion)) fileCheck.enforce(row);
      throw stateError(now, event.configVersion);
    }
    // A claim committed by another process while this statement waited on it is not in the
    // statement's snapshot: read it now, with the webhook (whose change since the lookup, such as
    // a new window, comes first).
    if (keyValues || dedupeValues) {
      const now = await heldNow(client, event, key?.key ?? null, dedupeValues?.dedupe_key ?? null);
      if (now.current && now.holder) return held(now.holder);
      if (now.current && now.duplicateOf) {
        if (row.key_claimed) await pointKeyAt(client, event.webhookId, key!.key, now.duplicateOf);
        return now.duplicateOf;
      }
      // The key's claim lost to a request that has not committed (nor rolled back) yet.
      if (now.current && now.status === 'active' && key && !row.key_claimed) throw new IdempotencyKeyInProgress();
      throw stateError(now.webhook, event.configVersion);
    }
    throw await stateNow(client, event.webhookId, event.configVersion);
  };
  // Small rate limits, or files near their quota: the checks are exact under their locks (ingest's
  // first, as everywhere). A key and a dedupe id claimed together: one transaction, so a key
  // claimed for an event the dedupe then refused points at the dedupe's answer before anyone sees it.
  const both = key !== null && dedupeValues !== null;
  const locked = async (client: pg.PoolClient) => {
    if (check?.exact) await check.lock(client);
    if (fileCheck?.exact) await fileCheck.lock(client);
    return run(client);
  };
  // In the caller's transaction the statement counts the event (it commits, or not, with it); else
  // this process does, once the statement (or the transaction here) committed (ingest-counts.ts).
  if (isPoolClient(db)) return check?.exact || fileCheck?.exact || both ? locked(db) : run(db);
  // An event with nothing of its own to claim or check exactly (the hot path) may share its
  // statement with others of its webhook (store-batch.ts); the rest go alone.
  const batchable = delivery !== undefined && db === rt.db.pool && !check?.exact && !files && !dedupeValues && !key && !event.source;
  const duplicate = batchable
    ? await ingestBatches(rt).add(
        {
          projectId: event.projectId,
          webhookId: event.webhookId,
          configVersion: event.configVersion,
          quotas,
          ingestRate: countsTowardIngestRate(event.channel),
          job: delivery.job !== false,
          claimed: delivery.job === false && delivery.claim !== undefined,
        },
        {
          origin,
          row: batchRow(event, delivery),
          body: event.body,
          stored: (stored) => {
            if (delivery.claim) delivery.claim.stored = stored;
          },
          single: () => run(db),
        },
      )
    : !check?.exact && !fileCheck?.exact && !both
      ? await run(db)
      : await inTransaction(db, locked);
  if (!duplicate) ingestCounts(rt).add(event.webhookId, event.projectId);
  return duplicate;
}

/** The event's and its delivery's columns in a batch statement (store-batch.ts). */
function batchRow(e: NewEvent, d: IngestDelivery): BatchRow {
  return {
    event_id: e.id,
    channel: e.channel,
    method: e.method,
    path: e.path,
    query: e.query,
    headers: e.headers,
    content_type: e.contentType,
    payload_expires_at: e.payloadExpiresAt,
    delivery_id: d.id,
    destination_id: d.destinationId,
    destination: d.destination,
    status: d.status,
    run_at: d.runAt,
    idempotency_key: d.idempotencyKey ?? null,
    ...(d.claim ? { lease_ms: d.claim.leaseMs, slot_lease: d.claim.leaseId } : {}),
  };
}

interface KeyHolder extends DuplicateOf {
  fingerprint: string;
}

/** After the statement: the key's holder and the dedupe id's holder as committed now, with the webhook's state. */
async function heldNow(db: pg.Pool | pg.PoolClient, event: NewEvent, key: string | null, dedupeKey: string | null) {
  const { rows } = await db.query<{ status: string; config_version: number; holder: KeyHolder | null; duplicate_of: DuplicateOf | null }>(
    `SELECT w.status, w.config_version,
            (SELECT json_build_object('eventId', k.event_id, 'deliveryId', k.delivery_id, 'fingerprint', k.fingerprint) FROM ingest_idempotency_keys k
              WHERE $2::text IS NOT NULL AND k.webhook_id = w.id AND k.key = $2 AND k.expires_at > ${NOW_UTC}) AS holder,
            (SELECT json_build_object('eventId', d.event_id, 'deliveryId', d.delivery_id) FROM inbound_dedupe d
              WHERE $3::text IS NOT NULL AND d.webhook_id = w.id AND d.key = $3 AND d.expires_at > ${NOW_UTC}) AS duplicate_of
       FROM webhooks w WHERE w.id = $1`,
    [event.webhookId, key, dedupeKey],
  );
  const w = rows[0];
  const current = !!w && (event.configVersion === null || w.config_version === event.configVersion);
  return { current, status: w?.status, holder: w?.holder ?? null, duplicateOf: w?.duplicate_of ?? null, webhook: w };
}

/** A key claimed by a request the provider's dedupe answered as a duplicate: it answers with the same ids from now on. */
async function pointKeyAt(db: pg.Pool | pg.PoolClient, webhookId: string, key: string, to: DuplicateOf): Promise<void> {
  await db.query('UPDATE ingest_idempotency_keys SET event_id = $3, delivery_id = $4 WHERE webhook_id = $1 AND key = $2', [webhookId, key, to.eventId, to.deliveryId]);
}

function isPoolClient(db: pg.Pool | pg.PoolClient): db is pg.PoolClient {
  return typeof (db as pg.PoolClient).release === 'function';
}

/** Why a webhook that was active at lookup no longer takes events as read. */
async function stateNow(db: pg.Pool | pg.PoolClient, webhookId: string, configVersion: number | null): Promise<Error> {
  return stateError(await webhookNow(db, webhookId), configVersion);
}

async function webhookNow(db: pg.Pool | pg.PoolClient, webhookId: string): Promise<{ status: string; config_version: number } | undefined> {
  const { rows } = await db.query<{ status: string; config_version: number }>('SELECT status, config_version FROM webhooks WHERE id = $1', [webhookId]);
  return rows[0];
}

/** Why an event was not stored although its checks admitted it: the webhook changed (retry on a fresh lookup), is paused, or is gone. */
function stateError(now: { status: string; config_version: number } | undefined, configVersion: number | null): Error {
  if (now && configVersion !== null && now.config_version !== configVersion) return new StaleIngestTarget();
  return now?.status === 'paused' ? new WebhookPaused() : new NotFound('webhook');
}
