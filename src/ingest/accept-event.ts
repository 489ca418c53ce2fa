import type pg from 'pg';
import { DomainError, InvalidState, NotFound } from '../errors.ts';
import { ingestEvents } from '../prom.ts';
import type { Span } from '@opentelemetry/api';
import { tracingEnabled, withSpan } from '../tracing.ts';
import { sha256Hex } from '../encryption.ts';
import { newId } from '../ids.ts';
import { webhookQuotas } from '../projects/quotas/limits.ts';
import { bodyFields, providerDeliveryId, providerEventType, providerSecretHeader } from '../providers/index.ts';
import { bodyForMatching, matchRule, type EventContext } from '../routing/rules.ts';
import type { Runtime } from '../runtime.ts';
import { assertStorable } from '../validation.ts';
import { PUBLIC_ID, type IngestTarget } from './find-ingest-target.ts';
import { ingestTargets } from './ingest-target-cache.ts';
import type { InboundEvent } from './inbound-event.ts';
import { StaleIngestTarget, storeEvent, type IngestDelivery } from './store-event.ts';

export interface AcceptedEvent {
  eventId: string;
  deliveryId: string;
  /**
   * `duplicate`: the idempotency key (CONTRACT §12), or the provider's delivery id (§10), was
   * accepted within the webhook's window; the ids are the original's and nothing was stored.
   */
  status: 'queued' | 'scheduled' | 'duplicate';
}

/** What the webhook's provider pack reads from a request (the body parsed at most once, and only when asked). */
class ProviderView {
  private fieldsRead = false;
  private fields: unknown;
  private typeRead = false;
  private type: string | null = null;
  constructor(
    private readonly target: IngestTarget,
    private readonly event: InboundEvent,
  ) {}
  private readonly bodyFields = () => {
    if (!this.fieldsRead) (this.fieldsRead = true), (this.fields = bodyFields(this.event.body, this.event.contentType));
    return this.fields;
  };
  eventType(): string | null {
    const pack = this.target.providerPack;
    if (!this.typeRead) (this.typeRead = true), (this.type = pack ? providerEventType(pack, this.event.headers, this.bodyFields) : null);
    return this.type;
  }
  /**
   * The deduplication key when the webhook's window is on: the provider's delivery id (with the
   * provider and event type), else a Standard Webhooks `webhook-id`; null when there is none.
   */
  dedupeKey(): string | null {
    if (this.target.dedupeWindowSeconds <= 0) return null;
    const pack = this.target.providerPack;
    const id = pack ? providerDeliveryId(pack, this.event.headers, this.bodyFields) : null;
    const key = id !== null ? `${pack!.provider}:${this.eventType() ?? ''}:${id}` : typeof this.event.headers['webhook-id'] === 'string' ? `webhook-id::${this.event.headers['webhook-id']}` : null;
    return key === null ? null : key.length > 512 ? `sha256:${sha256Hex(key)}` : key;
  }
}

/** Routing: the first matching rule's destination, else the default one. */
export function routeInbound(target: IngestTarget, event: InboundEvent, provider = new ProviderView(target, event)) {
  const byId = new Map(target.destinations.map((d) => [d.id, d]));
  const fallback = target.destinations.find((d) => d.isDefault)!;
  if (target.routing.length === 0) return fallback;
  // The files' rows are the service's bookkeeping, not something rules match on.
  const { files: _files, ...seen } = event;
  const context: EventContext = { ...seen, body: bodyForMatching(event.body), provider: target.providerPack?.provider ?? null, eventType: provider.eventType() };
  const rule = matchRule(target.routing, context);
  return (rule && byId.get(rule.destinationId)) || fallback;
}

/**
 * Decides, from the webhook as read inside the ingest transaction, whether the request
 * gets in (authentication 401, validation 400, state 409, in the contract's order) and
 * when its delivery runs (null: now), with the request's idempotency key. Throws to refuse. A
 * request with a key on a paused webhook may be let through: the ingest statement answers its
 * key first, and 409 webhook_paused after (CONTRACT §12's order).
 */
export type Admission = (target: IngestTarget) => Date | null | Admitted;

/** What an admission decided: when the delivery runs (null: now), and the producer's idempotency key, if any. */
export interface Admitted {
  runAt: Date | null;
  /** CONTRACT §12: the key, and the fingerprint of "the same body" for the channel (computed only when the window is on). */
  idempotency?: { key: string; fingerprint: () => string } | null;
}

/**
 * The inbound event, or how to build it once the webhook is known and admitted (form and email
 * envelopes name the webhook and show file links only where the project keeps file content).
 * Called again when the decision is taken again on a fresher lookup.
 */
export type InboundEventSource = InboundEvent | DeferredInboundEvent;

/** An event its channel (form, email) builds once the webhook is known; the channel is known before. */
export interface DeferredInboundEvent {
  channel: InboundEvent['channel'];
  build(target: IngestTarget): InboundEvent;
}

/**
 * Accepts an event for the webhook `publicId`: takes the webhook's lookup (kept by this process,
 * else read: 404 when unknown or archived), admits the request, routes it, then checks quotas
 * and stores the event with its delivery (row + job; no job when the webhook's drain runs in this
 * process and takes it over) in ONE statement that commits on its own
 * (see storeEvent), and only while the webhook is still as looked up. Resolves only after that
 * commit. The happy path is that one round trip (two when the lookup is read).
 *
 * A kept lookup may be out of date: a request it refuses (or that the statement finds out of
 * date) is decided again on a fresh lookup, as is one whose webhook changed during the request.
 * A try that fails stores nothing.
 *
 * `client`: a connection in the caller's transaction (the cron channel fires a tick and plans
 * the next in one transaction; form and email record files with the event); the event then
 * commits with it, and the caller wakes the runners (rt.runners.nudge) once it has committed.
 * Without, on the pool, and the runners are woken here.
 *
 * The outcome is counted in relay_ingest_events_total, unless `count` is false: then the caller
 * counts it (countIngest) once it is final (email: a message's events commit, or are dropped,
 * together). `origin`: the connection the request came on (HTTP and forms), which tells a
 * producer's requests one after another from several at once (see store-batch.ts).
 */
export async function acceptEvent(
  rt: Runtime,
  publicId: string,
  event: InboundEventSource,
  admit: Admission,
  client?: pg.PoolClient,
  { count = true, origin }: { count?: boolean; origin?: object } = {},
): Promise<AcceptedEvent> {
  // The channel labels this process's Prometheus series (and the ingest span).
  const { channel } = event;
  const accept = async (span: Span | null) => {
    try {
      const accepted = await acceptOnce(rt, publicId, event, admit, client, origin);
      if (count) countIngest(channel, accepted);
      span?.setAttributes({ 'relay.channel': channel, 'relay.event_id': accepted.eventId, 'relay.delivery_id': accepted.deliveryId, 'relay.status': accepted.status });
      return accepted;
    } catch (err) {
      if (count) countIngest(channel, { refused: err });
      span?.setAttributes({ 'relay.channel': channel, 'relay.refused': err instanceof DomainError ? err.code : 'error' });
      throw err;
    }
  };
  return tracingEnabled() ? withSpan('ingest', { 'relay.webhook.public_id': publicId }, accept) : accept(null);
}

/** Counts one ingest outcome: an event accepted (or answered `duplicate`), or a refusal with its reason (the error's code). */
export function countIngest(channel: InboundEvent['channel'], outcome: AcceptedEvent | { refused: unknown }): void {
  if ('refused' in outcome) ingestEvents.inc({ channel, result: 'refused', reason: outcome.refused instanceof DomainError ? outcome.refused.code : 'error' });
  else ingestEvents.inc({ channel, result: outcome.status === 'duplicate' ? 'duplicate' : 'accepted', reason: '' });
}

async function acceptOnce(rt: Runtime, publicId: string, event: InboundEventSource, admit: Admission, client?: pg.PoolClient, origin?: object): Promise<AcceptedEvent> {
  if (!PUBLIC_ID.test(publicId)) throw new NotFound('webhook');
  const cache = ingestTargets(rt);
  let { target, kept } = await cache.get(rt, publicId, client);
  for (let tries = 1; ; tries++) {
    try {
      return await acceptFor(rt, target, event, admit, client, origin);
    } catch (err) {
      // A fresh lookup goes out of date only when the webhook changes during the request.
      const stale = err instanceof StaleIngestTarget;
      if (!kept && !stale) throw err;
      if (tries >= 3) throw stale ? new InvalidState('the webhook kept changing during the request; send it again') : err;
      target = await cache.fresh(rt, publicId, client);
      kept = false;
    }
  }
}

async function acceptFor(rt: Runtime, target: IngestTarget | null, source: InboundEventSource, admit: Admission, client?: pg.PoolClient, origin?: object): Promise<AcceptedEvent> {
  if (!target || target.status === 'archived') throw new NotFound('webhook');
  const admitted = admit(target);
  const { runAt, idempotency } = admitted === null || admitted instanceof Date ? { runAt: admitted, idempotency: null } : admitted;
  let event = 'build' in source ? source.build(target) : source;
  const secretHeader = target.providerPack && providerSecretHeader(target.providerPack);
  if (secretHeader && secretHeader in event.headers) {
    // The provider's secret itself (GitLab's token) is a credential, not part of the event.
    const { [secretHeader]: _secret, ...headers } = event.headers;
    event = { ...event, headers };
  }
  // What the event row keeps as text and jsonb (the body is kept as bytes).
  assertStorable({ path: event.path, query: event.query, headers: event.headers, contentType: event.contentType }, '');
  const provider = new ProviderView(target, event);
  const { isDefault: _isDefault, ...destination } = routeInbound(target, event, provider);
  const dedupeKey = provider.dedupeKey();
  const eventId = newId('evt');
  const retainFrom = Math.max(Date.now(), runAt?.getTime() ?? 0);
  const payloadExpiresAt = new Date(retainFrom + webhookQuotas(target.project, target).payload_retention_seconds * 1000);
  const status = runAt && runAt.getTime() > Date.now() ? 'scheduled' : 'queued';
  // A due delivery whose webhook is being drained in this process goes to that drain: claimed
  // for it by the statement that writes it, when the drain has room and the webhook's settings
  // as it read them (claimDirect); else handed to it once committed. Either way it is written
  // without a job (no job row written, fetched, completed or deleted).
  const direct = !client && status === 'queued' ? rt.runners.claimDirect(target.webhookId, target.configVersion) : null;
  const handOver = !direct && !client && status === 'queued' && rt.runners.drainRunning(target.webhookId);
  const delivery: IngestDelivery = {
    id: newId('del'),
    destinationId: destination.id,
    destination,
    status: direct ? 'delivering' : status,
    runAt,
    idempotencyKey: idempotency?.key ?? null,
    job: !handOver && !direct,
    claim: direct ? { leaseId: direct.leaseId, leaseMs: direct.leaseMs } : undefined,
  };
  const windowSeconds = target.idempotencyWindowSeconds;
  let duplicateOf;
  try {
    duplicateOf = await storeEvent(
      rt,
      client ?? rt.db.pool,
      { ...event, id: eventId, projectId: target.projectId, webhookId: target.webhookId, payloadExpiresAt, configVersion: target.configVersion },
      { project: target.project, webhook: { id: target.webhookId, quotaOverrides: target.quotaOverrides } },
      delivery,
      dedupeKey === null ? undefined : { key: dedupeKey, windowSeconds: target.dedupeWindowSeconds },
      idempotency && windowSeconds > 0 ? { key: idempotency.key, fingerprint: idempotency.fingerprint(), windowSeconds } : undefined,
      origin,
    );
  } catch (e) {
    direct?.cancel();
    // The webhook was deleted since the lookup.
    throw (e as { code?: unknown } | null)?.code === '23503' ? new NotFound('webhook') : e;
  }
  if (duplicateOf) {
    direct?.cancel();
    return { ...duplicateOf, status: 'duplicate' };
  }
  if (direct) {
    const { receivedAt, listened } = delivery.claim!.stored!;
    direct.start({
      row: { id: delivery.id, project_id: target.projectId, webhook_id: target.webhookId, event_id: eventId, destination: JSON.parse(JSON.stringify(destination)), idempotency_key: delivery.idempotencyKey ?? null },
      body: event.body,
      contentType: event.contentType,
      eventHeaders: event.headers as Record<string, string>,
      event: { channel: event.channel, method: event.method, path: event.path, query: event.query, receivedAt },
      listened,
    });
    return { eventId, deliveryId: delivery.id, status };
  }
  // In the caller's transaction the job is not visible until it commits: the caller nudges then.
  if (handOver) {
    // The drain ended meanwhile (its time was up): the delivery gets its job after all.
    if (!rt.runners.handOver(target.webhookId, delivery.id)) await rt.runners.queueJobless(delivery.id);
  } else if (!client) rt.runners.nudge();
  return { eventId, deliveryId: delivery.id, status };
}
