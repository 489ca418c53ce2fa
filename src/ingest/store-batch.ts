import pg from 'pg';
import { NamedParams } from '../db/named-params.ts';
import { insertDeliveryCtes } from '../deliveries/enqueue.ts';
import { ATTEMPT_TASK } from '../deliveries/job.ts';
import { deliveryListenedSql } from '../deliveries/listeners.ts';
import { ingestQuotaCheck, ingestQuotaCte, ingestRateHitCte, type IngestQuotaRow } from '../projects/quotas/ingest-check.ts';
import type { ProjectQuotaSource, WebhookQuotaSource } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';

/**
 * Ingest statements shared by the events of one webhook that arrive together (docs/scaling.md,
 * "Ingest statements"): checked against the quotas as one (every quota counts each of them),
 * stored all or none, committed together. It saves what each statement costs whatever it carries:
 * its round trip, its commit's WAL flush, the quota reads, the usage-counter triggers.
 *
 * While a webhook's statement is on its way, the events that arrive for it wait for it and then
 * go together. A busy webhook's event (another connection sent it one less than twice
 * INGEST_BATCH_WAIT_MS before) also waits for others, at most INGEST_BATCH_WAIT_MS (5 ms) from
 * its arrival, less once every connection heard from lately has an event waiting; any other
 * event goes at once. An event that goes alone is stored by its own statement (storeEvent's),
 * exactly as without batches. A statement carries at most 1 % of the smallest limit that counts
 * events (batchCap), and after a quota refused a batch the webhook's events go alone for a second.
 *
 * A batch that is not stored whole (a quota it would exceed, a webhook that changed since its
 * lookup, any error PostgreSQL reports) stores nothing, and its events then go one by one, in
 * their order, each through its own statement: each gets the answer it would have had alone.
 */

/** One event's columns and its delivery's, as the batch statement reads them (json_to_recordset). */
export interface BatchRow {
  event_id: string;
  channel: string;
  method: string | null;
  path: string | null;
  query: unknown;
  headers: unknown;
  content_type: string | null;
  payload_expires_at: Date | null;
  delivery_id: string;
  destination_id: string | null;
  destination: unknown;
  status: string;
  run_at: Date | null;
  idempotency_key: string | null;
  /** A direct claim (IngestDelivery.claim): its lease. */
  lease_ms?: number;
  slot_lease?: string;
}

/** An event waiting for its webhook's batch. */
export interface BatchItem<T> {
  /** The connection its request came on, if any: a producer's requests one after another never wait for each other. */
  origin?: object;
  row: BatchRow;
  body: Buffer;
  /** Stored in a batch: when it was received, and whether anyone listens to the project's deliveries. */
  stored(s: { receivedAt: Date; listened: boolean }): void;
  /** The event alone, through its own statement: for a batch of one, or one not stored whole. */
  single(): Promise<T>;
  resolve(value: T | null): void;
  reject(err: unknown): void;
}

/** What the events of one batch share: their webhook as looked up, and the statement's shape. */
export interface BatchTarget {
  projectId: string;
  webhookId: string;
  configVersion: number | null;
  quotas: { project: ProjectQuotaSource; webhook: WebhookQuotaSource };
  /** Counted in the ingest rate (every channel that batches but cron ticks, which do not batch). */
  ingestRate: boolean;
  /** Each delivery with its job; else without (`claimed`: claimed as written, else handed to a drain). */
  job: boolean;
  claimed: boolean;
}

/** At most this many events, and about this many body bytes, in one statement. */
const MAX_EVENTS = 64;
const MAX_BYTES = 4 * 1024 * 1024;

type Shape = { quotas: 'none' | 'quotas' | 'rate'; job: boolean; claimed: boolean };

interface BatchStatement {
  name: string;
  text: string;
  params: NamedParams;
}

/**
 * The gate of every ingest statement (storeEvent's and a batch's): the webhook still takes events,
 * as the caller read it (`versionSql` NULL: any version), so a change committed since the lookup
 * (a pause, a new secret, a routing rule) wins without another round trip.
 */
export const webhookTakesEvents = (webhookIdSql: string, versionSql: string) =>
  `EXISTS (SELECT 1 FROM webhooks WHERE id = ${webhookIdSql} AND status = 'active' AND (${versionSql} IS NULL OR config_version = ${versionSql}))`;

/**
 * The batch statement of a shape: storeEvent's statement for many rows (the same gates, checks,
 * event, delivery, job and rate-window hit), its rows in order so that their deliveries' `seq`
 * follows their arrival.
 */
function buildStatement({ quotas, job, claimed }: Shape): BatchStatement {
  const p = new NamedParams();
  const ctes: string[] = [];
  if (quotas !== 'none') ctes.push(ingestQuotaCte(p, quotas === 'quotas'));
  ctes.push(`batch_rows AS MATERIALIZED (
  SELECT * FROM json_to_recordset(${p.$('rows', 'json')}) AS r(ord int, event_id text, channel text, method text, path text, query jsonb, headers jsonb, content_type text,
         body_start int, body_size int, payload_expires_at timestamptz, delivery_id text, destination_id text, destination jsonb, status text, run_at timestamptz,
         idempotency_key text, lease_ms int, slot_lease text)
)`);
  const gates = `${quotas === 'none' ? '' : 'ingest_quota.admitted AND '}${webhookTakesEvents(p.$('webhook_id'), p.$('config_version', 'int'))}`;
  ctes.push(`stored AS (
  INSERT INTO events (id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size, payload_expires_at)
  SELECT r.event_id, ${p.$('project_id')}, ${p.$('webhook_id')}, r.channel, r.method, r.path, r.query, r.headers, r.content_type,
         substring(${p.$('bodies', 'bytea')} FROM r.body_start FOR r.body_size), r.body_size, r.payload_expires_at
    FROM ${quotas === 'none' ? '' : 'ingest_quota, '}batch_rows r WHERE ${gates}
   ORDER BY r.ord
  RETURNING id, project_id, webhook_id, received_at
)`);
  if (quotas !== 'none') ctes.push(ingestRateHitCte('stored'));
  ctes.push(
    insertDeliveryCtes(
      'delivery',
      {
        id: 'r.delivery_id',
        projectId: 's.project_id',
        webhookId: 's.webhook_id',
        eventId: 's.id',
        destinationId: 'r.destination_id',
        destination: 'r.destination',
        status: 'r.status',
        nextAttemptAt: 'r.run_at',
        idempotencyKey: 'r.idempotency_key',
        ...(claimed ? { attempts: '1', leaseUntil: 'now() + make_interval(secs => r.lease_ms::float8 / 1000)', slotLease: 'r.slot_lease' } : {}),
      },
      job ? p.$('attempt_task') : null,
      'stored s JOIN batch_rows r ON r.event_id = s.id ORDER BY r.ord',
    ),
  );
  const columns = [
    ...(quotas === 'none' ? [] : ['ingest_quota.admitted', 'ingest_quota.usage']),
    '(SELECT count(*) FROM stored)::int AS stored',
    '(SELECT min(received_at) FROM stored) AS received_at',
    ...(claimed ? [`${deliveryListenedSql(p.$('project_id'))} AS listened`] : []),
  ];
  const name = `ingest_batch${quotas === 'none' ? '' : `_within_${quotas}`}${claimed ? '_claimed' : job ? '' : '_nojob'}`;
  const text = `WITH ${ctes.join(',\n')}
SELECT ${columns.join(', ')}${quotas === 'none' ? '' : ' FROM ingest_quota'}`;
  return { name, text, params: p };
}

const statements = new Map<string, BatchStatement>();

function statementFor(shape: Shape): BatchStatement {
  const key = `${shape.quotas} ${shape.job} ${shape.claimed}`;
  let s = statements.get(key);
  if (!s) statements.set(key, (s = buildStatement(shape)));
  return s;
}

/**
 * An error PostgreSQL reported for the statement, which then stored nothing, as against a lost
 * connection (class 08) or a server shutting down (57P), after which its commit may or may not have happened.
 */
const reportedByServer = (err: unknown) => err instanceof pg.DatabaseError && !/^(08|57P)/.test(err.code ?? '');

/** An event in its queue: until when it waits for others (performance.now() ms; 0: it does not), and its connection's number. */
type Waiting = BatchItem<unknown> & { waitUntil: number; originId: number };

interface Queue {
  target: BatchTarget;
  items: Waiting[];
  /** Its events are being stored (a statement on its way, or the first event waiting for others). */
  busy: boolean;
  /** Ends the first event's wait early: every connection the webhook heard from lately has an event here, or the batch is full. */
  wake: (() => void) | null;
  /** How many events one statement of it may carry (batchCap: its quotas are fixed for its config_version, part of its key). */
  cap: number;
}

/** What a process remembers of a webhook's (and shape's) recent events. */
interface Activity {
  /** Each recent connection's number (0: none) and when its last event arrived (performance.now() ms). */
  origins: Map<number, number>;
  /** Until when its events go alone, at once (performance.now() ms): a batch of it was refused by a quota a moment ago. */
  aloneUntil: number;
}

/** How many webhooks' recent activity a process keeps (the least recent are forgotten first). */
const ACTIVITY_KEPT = 10_000;
/** How long a webhook's events go alone after a quota refused a batch of them. */
const ALONE_AFTER_REFUSAL_MS = 1_000;

/** The batches of one process (of one runtime's pool), by webhook and statement shape. */
class IngestBatches {
  private readonly queues = new Map<string, Queue>();
  private readonly activity = new Map<string, Activity>();
  /** Connections by number, without keeping them alive. */
  private readonly originIds = new WeakMap<object, number>();
  private nextOriginId = 1;
  /** How many events came while their webhook was busy (each may wait), and how many were stored by a batch statement (the tests read them). */
  waited = 0;
  batched = 0;

  constructor(private readonly rt: Pick<Runtime, 'config'> & { db: { pool: pg.Pool } }) {}

  private originId(origin: object | undefined): number {
    if (!origin) return 0;
    let id = this.originIds.get(origin);
    if (id === undefined) this.originIds.set(origin, (id = this.nextOriginId++));
    return id;
  }

  /** The key's activity, most recent last (Map order is insertion order), its connections older than `since` forgotten. */
  private activityOf(key: string, since: number): Activity {
    let a = this.activity.get(key);
    if (a) this.activity.delete(key);
    else a = { origins: new Map(), aloneUntil: 0 };
    this.activity.set(key, a);
    if (this.activity.size > ACTIVITY_KEPT) this.activity.delete(this.activity.keys().next().value!);
    for (const [id, at] of a.origins) if (at < since) a.origins.delete(id);
    return a;
  }

  /** Stores the event in its webhook's next batch (or alone); resolves as storeEvent's statement would. */
  add<T>(target: BatchTarget, item: Omit<BatchItem<T>, 'resolve' | 'reject'>): Promise<T | null> {
    const key = `${target.webhookId} ${target.configVersion} ${target.ingestRate} ${target.job} ${target.claimed}`;
    const wait = this.rt.config.INGEST_BATCH_WAIT_MS;
    const now = performance.now();
    const activity = this.activityOf(key, now - 2 * wait);
    // A quota refused a batch of this webhook a moment ago: its events go alone, side by side, as
    // without batches (a refusal costs one statement, and none waits behind another's).
    if (now < activity.aloneUntil) return item.single();
    let queue = this.queues.get(key);
    if (!queue) this.queues.set(key, (queue = { target, items: [], busy: false, wake: null, cap: this.batchCap(target) }));
    const q = queue;
    const originId = this.originId(item.origin);
    // Busy: another connection (or an unknown one) sent it an event within twice the wait. One
    // producer sending one request after another on one connection would only wait for itself: it never waits.
    const waits = wait > 0 && q.cap > 1 && activity.origins.size > (originId !== 0 && activity.origins.has(originId) ? 1 : 0);
    activity.origins.set(originId, now);
    if (waits) this.waited++;
    return new Promise<T | null>((resolve, reject) => {
      q.items.push({ ...item, resolve, reject, waitUntil: waits ? now + wait : 0, originId } as Waiting);
      if (!q.busy) void this.next(key, q);
      else if (q.wake && (q.items.length >= q.cap || this.everyoneIn(q, activity))) q.wake();
    });
  }

  /** Whether every connection the webhook heard from lately has an event in the queue: none of them can send another before its answer. */
  private everyoneIn(q: Queue, activity: Activity): boolean {
    if (activity.origins.has(0)) return false;
    const queued = new Set(q.items.map((it) => it.originId));
    for (const id of activity.origins.keys()) if (!queued.has(id)) return false;
    return true;
  }

  private async next(key: string, q: Queue): Promise<void> {
    q.busy = true;
    try {
      while (q.items.length > 0) {
        // The first event of a busy webhook waits (at most INGEST_BATCH_WAIT_MS since it arrived) for others.
        const wait = q.items[0].waitUntil - performance.now();
        if (wait > 0 && q.items.length < q.cap) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, wait);
            q.wake = () => (clearTimeout(timer), resolve());
          });
          q.wake = null;
        }
        let bytes = 0;
        let n = 0;
        while (n < q.items.length && n < q.cap && (n === 0 || bytes + q.items[n].body.length <= MAX_BYTES)) bytes += q.items[n++].body.length;
        const items = q.items.splice(0, n);
        if (items.length === 1) await settle(items[0], items[0].single());
        // Whatever goes wrong, every event of the batch gets an answer (one already given keeps it).
        else await this.store(key, q.target, items, bytes).catch((err: unknown) => items.forEach((it) => it.reject(err)));
      }
    } finally {
      q.busy = false;
      q.wake = null;
      if (q.items.length === 0) this.queues.delete(key);
    }
  }

  /**
   * How many events one statement may carry: MAX_EVENTS, and at most 1 % of the smallest limit
   * that counts events, so that statements in flight side by side (which each read the usage
   * before the others' events) overshoot a limit by no more than that (src/projects/quotas/limits.ts).
   */
  private batchCap(target: BatchTarget): number {
    const limit = ingestQuotaCheck(this.rt, { ...target.quotas, bodyBytes: 0, ingestRate: target.ingestRate })?.smallestCountLimit ?? null;
    return limit === null ? MAX_EVENTS : Math.max(1, Math.min(MAX_EVENTS, Math.floor(limit / 100)));
  }

  private async store(key: string, target: BatchTarget, items: BatchItem<unknown>[], bytes: number): Promise<void> {
    const check = ingestQuotaCheck(this.rt, { ...target.quotas, bodyBytes: bytes, ingestRate: target.ingestRate, events: items.length });
    // Small rate limits are exact only one event at a time, under their lock (storeEvent).
    if (check?.exact) return this.oneByOne(items);
    const statement = statementFor({ quotas: check ? (check.readCounters ? 'quotas' : 'rate') : 'none', job: target.job, claimed: target.claimed });
    let start = 1;
    const rows = items.map((it, ord) => {
      const row = { ord, ...it.row, body_start: start, body_size: it.body.length };
      start += it.body.length;
      return row;
    });
    const values = {
      ...check?.values,
      rows: JSON.stringify(rows),
      bodies: Buffer.concat(items.map((it) => it.body)),
      project_id: target.projectId,
      webhook_id: target.webhookId,
      config_version: target.configVersion,
      attempt_task: ATTEMPT_TASK,
    };
    type Row = IngestQuotaRow & { stored: number; received_at: Date | null; listened?: boolean };
    let row: Row;
    try {
      ({
        rows: [row],
      } = await this.rt.db.pool.query<Row>({ name: statement.name, text: statement.text, values: statement.params.bind(values) }));
    } catch (err) {
      // Refused by PostgreSQL, the statement stored nothing: each event on its own says why (or goes in).
      if (reportedByServer(err)) return this.oneByOne(items);
      for (const it of items) it.reject(err);
      return;
    }
    // The gates are the batch's: all its events were stored, or none.
    if (row.stored === 0) {
      const activity = this.activity.get(key);
      if (check && !row.admitted && activity) activity.aloneUntil = performance.now() + ALONE_AFTER_REFUSAL_MS;
      return this.oneByOne(items);
    }
    check?.enforce(row);
    this.batched += items.length;
    for (const it of items) {
      it.stored({ receivedAt: row.received_at!, listened: row.listened === true });
      it.resolve(null);
    }
  }

  private async oneByOne(items: BatchItem<unknown>[]): Promise<void> {
    for (const it of items) await settle(it, it.single());
  }
}

async function settle<T>(item: BatchItem<T>, p: Promise<T>): Promise<void> {
  try {
    item.resolve(await p);
  } catch (err) {
    item.reject(err);
  }
}

const batches = new WeakMap<object, IngestBatches>();

/** This runtime's ingest batches (one per process and database). */
export function ingestBatches(rt: Pick<Runtime, 'config' | 'db'>): IngestBatches {
  let b = batches.get(rt.db);
  if (!b) batches.set(rt.db, (b = new IngestBatches(rt)));
  return b;
}
