import type pg from 'pg';
import { newId } from '../ids.ts';
import { deliveryView } from './delivery-view.ts';
import { deliveryNotification, NOTIFY_CHANNEL } from './notify.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { decryptSecret } from '../encryption.ts';
import { claimDelivery, type ClaimedDelivery } from './claim.ts';
import { addAttemptJobSql, ATTEMPT_TASK, requeueAttemptJob } from './job.ts';
import type { OutboundResult } from '../destinations/senders/http.ts';
import { AttemptRecorder, type AttemptResult } from './record.ts';
import { RollupWriter } from '../metrics/rollup.ts';
import { claimDeliveryBatch, DRAIN_MAX_IN_FLIGHT, handOffDueDeliveries, heldJobsMargin } from './claim-batch.ts';
import { acquireSlotLease, canStart, LEASE_RENEW_MS, releaseSlotLease, renewSlotLease, type SlotLease } from './slot-lease.ts';
import { isRetryable, normalizeRetryPolicy, retryDelayMs, type FailureKind, type RetryPolicy } from '../webhook-config/retry-policy.ts';
import { signingHeaders } from './signing.ts';
import { transformPayload } from '../webhook-config/transform.ts';
import { createDestinationSenders, type DestinationSenders } from '../destinations/senders/index.ts';
import { JobTableVacuum } from './job-table-vacuum.ts';
import { tracingEnabled, withSpan } from '../tracing.ts';
import { automationRoom, runAutomation, type AutomationOutcome } from '../automations/run.ts';
import { bodyForMatching } from '../routing/rules.ts';
import { deferClaim } from './defer.ts';

const MAX_RETRY_AFTER_MS = 3_600_000;

export interface DeliveryEngine {
  rt: Runtime;
  recorder: AttemptRecorder;
  /** The per-webhook metrics roll-ups of recorded results (flushed once a second; undefined with METRICS_ROLLUPS=off). */
  rollups?: RollupWriter;
  /** The senders of every destination type (webhook, SQS, EventBridge, Pub/Sub, object storage). */
  senders: DestinationSenders;
  /** The drains running on this runner, by webhook (see attemptDelivery). */
  drains: Map<string, Drain>;
  jobTable: JobTableVacuum;
}

export function createDeliveryEngine(rt: Runtime): DeliveryEngine {
  const rollups = rt.config.METRICS_ROLLUPS === 'on' ? new RollupWriter(rt.db.relaxedPool) : undefined;
  const senders = createDestinationSenders({ allowPrivate: rt.config.ALLOW_PRIVATE_DESTINATIONS, allowAmbientCredentials: rt.config.ALLOW_AMBIENT_CLOUD_CREDENTIALS });
  return { rt, rollups, recorder: new AttemptRecorder(rt.db.relaxedPool, 200, rollups), drains: new Map(), senders, jobTable: new JobTableVacuum(rt.db.pool) };
}

/** How long one job drains its webhook before handing on to a new job (other webhooks get their turn). */
const DRAIN_BUDGET_MS = 5_000;

/** How long a job that named its delivery to a drain waits for the drain to take it up. */
const JOIN_WAIT_MS = 50;

/**
 * How long a drain with nothing to do waits for the webhook's next job before it ends: under a
 * steady rate the next event comes within it, and the drain (its lease) carries on rather than
 * ending and starting again per event.
 */
const LINGER_MS = 25;

/** When a drain found every slot of its webhook leased by other runners' drains: its deliveries' jobs run again after about this. */
const SLOTS_BUSY_RETRY_MS = 100;

/**
 * A job draining one parallel webhook on this runner; the webhook's other jobs name their
 * delivery to it. They wait (briefly) until a claim took their delivery up: while they hold
 * the runner's job slots, graphile-worker does not run through the queue ahead of the drain,
 * whose claims delete the jobs of the deliveries they take, so most jobs never run.
 */
class Drain {
  private waiting = new Map<string, () => void>();
  private wakeUp: (() => void) | null = null;
  /**
   * The drain could claim more now: a delivery named now wakes it, rather than waiting for an
   * attempt in flight to finish (which, with a slow receiver, could take the webhook's whole timeout).
   */
  roomLeft = false;

  get size() {
    return this.waiting.size;
  }

  join(deliveryId: string): Promise<void> {
    const joined = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, JOIN_WAIT_MS);
      const before = this.waiting.get(deliveryId);
      this.waiting.set(deliveryId, () => {
        clearTimeout(timer);
        before?.();
        resolve();
      });
    });
    if (this.roomLeft) this.wake();
    return joined;
  }

  /** Resolves at the next wake: a join the drain can claim at once, or an attempt answered. */
  woken(): Promise<void> {
    return new Promise((resolve) => {
      this.wakeUp = () => {
        this.wakeUp = null;
        resolve();
      };
    });
  }

  wake(): void {
    this.wakeUp?.();
  }

  /** No join wakes the drain any more (it is waiting for nothing). */
  sleep(): void {
    this.wakeUp = null;
  }

  /** Named deliveries a claim left out (it took as many as it had room for): the next claim names them again. */
  putBack(ids: string[]): void {
    for (const id of ids) if (!this.waiting.has(id)) this.waiting.set(id, () => {});
  }

  /** The named deliveries, and the release of their jobs once a claim took them up. */
  take(): { ids: string[]; release(): void } {
    const taken = this.waiting;
    this.waiting = new Map();
    return { ids: [...taken.keys()], release: () => taken.forEach((done) => done()) };
  }
}

/** A counting semaphore of a drain's leased slots, handed from attempt to attempt in memory. */
class Slots {
  private queue: (() => void)[] = [];
  private used = 0;

  constructor(public size: number) {}

  acquire(): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.queue.push(resolve));
  }

  release(): void {
    const next = this.used <= this.size ? this.queue.shift() : undefined;
    if (next) next();
    else this.used--;
  }

  /** The lease is lost: no slot is left, and the attempts waiting for one go on (to find they cannot start). */
  abandon(): void {
    this.size = 0;
    for (const next of this.queue.splice(0)) {
      this.used++;
      next();
    }
  }
}

/**
 * The graphile-worker task body for one delivery's job.
 *
 * Parallel webhooks are drained: the first job of a webhook on this runner takes a lease on the
 * webhook's free maxInFlight slots (slot-lease.ts) and claims its delivery with the webhook's
 * other due deliveries in one statement. It keeps up to twice its slots claimed (the attempts
 * running and those next in line), hands a slot from one attempt to the next the moment an
 * answer comes, and claims more as they finish, for up to DRAIN_BUDGET_MS; results are written in
 * batches (AttemptRecorder). Nothing per delivery updates a row the webhook's deliveries share.
 * The webhook's other jobs on this runner name their delivery to that drain and finish once a
 * claim took it up, and the jobs of deliveries it claimed are deleted before they run: a backlog
 * costs a statement per batch, not several per delivery. A drain that stops with work left hands
 * it to a new job.
 *
 * Strict FIFO and throttled webhooks: this delivery alone, in order and pace.
 */
export async function attemptDelivery(engine: DeliveryEngine, deliveryId: string, webhookId?: string, signal?: AbortSignal): Promise<void> {
  // This job's row is deleted once it finished.
  engine.jobTable.noteDeleted(1);
  const running = webhookId ? engine.drains.get(webhookId) : undefined;
  if (running) return running.join(deliveryId);
  const db = engine.rt.db.relaxedPool;
  if (!webhookId) {
    const { rows } = await db.query('SELECT webhook_id FROM deliveries WHERE id = $1', [deliveryId]);
    if (!rows[0]) return;
    webhookId = rows[0].webhook_id as string;
    const other = engine.drains.get(webhookId);
    if (other) return other.join(deliveryId);
  }
  const drained = webhookId;
  // Registered before the lease and the first claim, so that the webhook's jobs starting
  // meanwhile join it rather than each claiming on its own.
  const drain = new Drain();
  engine.drains.set(drained, drain);
  const stopDraining = () => {
    if (engine.drains.get(drained) === drain) engine.drains.delete(drained);
  };
  let lease: SlotLease | null = null;
  try {
    const grant = await acquireSlotLease(db, drained, DRAIN_MAX_IN_FLIGHT);
    if (grant.kind === 'lease') lease = grant.lease;
    else {
      stopDraining();
      const named = drain.take();
      if (grant.kind === 'single') {
        // Strict FIFO or throttled: each delivery goes its own way, with its own job.
        for (const id of named.ids) await requeueAttemptJob(db, id, new Date());
        named.release();
        return await attemptOne(engine, deliveryId);
      }
      // Every slot is another runner's drain's: theirs claim these deliveries too, and should
      // they stop first, these jobs come back.
      if (grant.kind === 'busy') await requeueWaiting(db, [deliveryId, ...named.ids], new Date(Date.now() + SLOTS_BUSY_RETRY_MS * (1 + Math.random())));
      named.release();
      return;
    }
  } catch (err) {
    stopDraining();
    drain.take().release();
    throw err;
  }
  await runDrain(engine, drain, lease, deliveryId, signal, stopDraining);
}

/** The drain's loop under its lease (see attemptDelivery). */
async function runDrain(engine: DeliveryEngine, drain: Drain, lease: SlotLease, deliveryId: string, signal: AbortSignal | undefined, stopDraining: () => void): Promise<void> {
  const db = engine.rt.db.relaxedPool;
  const drained = lease.webhookId;
  const margin = heldJobsMargin(engine.rt.config.WORKER_CONCURRENCY);
  const deadline = Date.now() + DRAIN_BUDGET_MS;
  const slots = new Slots(lease.slots);
  /** Claimed and not answered yet: waiting for a slot, or sent. */
  let pending = 0;
  /** Every attempt's whole run, through its recorded result. */
  const runs = new Set<Promise<void>>();
  let timeoutMs = 0;
  const window = () => Math.min(DRAIN_MAX_IN_FLIGHT, 2 * slots.size);
  /** Runs a claimed delivery (or one being claimed: a lost attempt taken over) in one of the drain's slots. */
  const start = (claimed: ClaimedDelivery | Promise<ClaimedDelivery | null>, published: Promise<void>) => {
    pending++;
    let slot = false;
    let done = false;
    // The attempt holds no request open any more: its slot goes to the next one at once.
    const answer = () => {
      if (done) return;
      done = true;
      pending--;
      if (slot) slots.release();
      drain.roomLeft = pending < window();
      drain.wake();
    };
    const run = (async () => {
      const claim = await claimed;
      if (!claim) return;
      await slots.acquire();
      slot = true;
      if (!canStart(lease, claim.webhook.timeoutMs)) await renewing;
      if (signal?.aborted || !canStart(lease, claim.webhook.timeoutMs)) {
        // Shutting down, or the lease could not be renewed: this one waits for another drain.
        answer();
        await published.catch(() => {});
        await deferClaim(db, claim.row.id, claim.attempt, new Date());
        return;
      }
      await sendTraced(engine, claim, published, answer);
    })().finally(answer);
    const tracked = run.catch((err) => log.error({ err }, 'delivery attempt failed')).finally(() => runs.delete(tracked));
    runs.add(tracked);
  };
  let handOff = false;
  let single = false;
  // The last claim took every due delivery it could: claim again only for deliveries named since.
  let exhausted = false;
  // Renewed on a timer of its own: with a slow receiver the loop may wait a whole timeout for an answer.
  let renewing: Promise<unknown> | null = null;
  const renewal = setInterval(() => {
    renewing ??= renewSlotLease(db, lease)
      .then((kept) => {
        if (kept === 0) slots.abandon();
        else if (kept < slots.size) slots.size = kept;
      })
      .catch((err) => log.warn({ err }, 'could not renew a slot lease'))
      .finally(() => (renewing = null));
  }, LEASE_RENEW_MS);
  try {
    for (let round = 0; ; round++) {
      const room = Math.min(window() - pending, automationRoom(engine.rt, drained, pending));
      // Claims come in batches: once half the window is free (the attempts next in line are
      // running), or for deliveries whose jobs named them.
      if (room > 0 && (round === 0 || drain.size || (!exhausted && (room >= slots.size || pending === 0))) && canStart(lease, timeoutMs)) {
        const named = drain.take();
        const asked = round === 0 ? [deliveryId, ...named.ids] : named.ids;
        const batch = await claimDeliveryBatch(db, drained, asked, room, margin, lease.id).finally(named.release);
        if (batch.kind === 'none') break; // the webhook is paused, archived or gone: resuming re-queues its deliveries
        if (batch.kind === 'single') {
          // Switched to strict FIFO or throttling: each delivery goes its own way, with its own job.
          stopDraining();
          single = true;
          for (const id of named.ids) await requeueAttemptJob(db, id, new Date());
          break;
        }
        engine.jobTable.noteDeleted(batch.jobsDeleted);
        timeoutMs = batch.claims[0]?.webhook.timeoutMs ?? timeoutMs;
        for (const id of batch.lost) start(takeOver(engine, id, lease), Promise.resolve());
        for (const n of batch.notDue) await requeueAttemptJob(db, n.id, n.at);
        // Sent while their `delivering` notifications go out; each result waits for those, so
        // subscribers see the changes in order.
        const published = batch.claims.length > 0 ? publishClaimed(db, batch.claims) : Promise.resolve();
        published.catch((err) => log.warn({ err }, 'could not publish claimed deliveries'));
        for (const claim of batch.claims) start(claim, published);
        exhausted = batch.claims.length < room;
        if (!exhausted && asked.length > 0) {
          // Full: named deliveries it had no room for are named again (their jobs are done).
          const seen = new Set([...batch.claims.map((c) => c.row.id as string), ...batch.lost, ...batch.notDue.map((n) => n.id)]);
          drain.putBack(asked.filter((id) => !seen.has(id)));
        }
        drain.roomLeft = pending < window();
      }
      if (Date.now() > deadline || signal?.aborted || lease.slots === 0) {
        handOff = true;
        break;
      }
      if (pending === 0) {
        if (drain.size) continue;
        // Nothing claimed and nothing named: wait a moment for the webhook's next job before ending.
        drain.roomLeft = true;
        const joined = await Promise.race([drain.woken().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), LINGER_MS))]);
        drain.sleep();
        if (!joined && !drain.size) break;
        continue;
      }
      // Claim again once attempts were answered (each answer wakes the drain), or a delivery was named meanwhile.
      await drain.woken();
      drain.sleep();
    }
  } finally {
    // A lost lease: a new drain (under a new lease) takes the webhook's next jobs at once, while
    // this one waits for its attempts under way.
    if (lease.slots === 0) stopDraining();
    // Every attempt answered (or, when shutting down, the waiting ones deferred): the slots go
    // back. The drain stays registered meanwhile, so that this runner's next jobs of the webhook
    // join it (and are handed on below) rather than find its slots still leased.
    while (pending > 0) {
      await drain.woken();
      drain.sleep();
    }
    clearInterval(renewal);
    await renewing;
    await releaseSlotLease(db, lease).catch((err) => log.warn({ err }, 'could not release a slot lease now; trying again in the background (it runs out by itself otherwise)'));
    stopDraining();
    // Deliveries named after the last claim: due, and their jobs ran. A new drain takes them, or
    // for a webhook that turned out one-at-a-time, each its own job again.
    const left = drain.take();
    if (left.ids.length) handOff = true;
    await Promise.all(runs);
    if (single) for (const id of left.ids) await requeueAttemptJob(db, id, new Date());
    else if (handOff) await handOffDueDeliveries(db, drained);
    left.release();
  }
}

/** Re-queues the jobs of those of `ids` still waiting for an attempt (not claimed meanwhile by another drain), or whose attempt was lost with its runner. */
async function requeueWaiting(db: pg.Pool, ids: string[], runAt: Date): Promise<void> {
  await db.query({
    name: 'requeue_waiting_deliveries',
    text: `SELECT ${addAttemptJobSql('$2', 'id', 'webhook_id', '$3::timestamptz')} FROM deliveries
            WHERE id = ANY($1::text[]) AND (status IN ('queued', 'retrying', 'scheduled') OR (status = 'delivering' AND lease_until < now()))`,
    values: [ids, ATTEMPT_TASK, runAt],
  });
}

/** deliveryUpdated for deliveries a batch claim started (the one-at-a-time claim notifies in its own statement). */
async function publishClaimed(db: pg.Pool, claims: ClaimedDelivery[]): Promise<void> {
  await db.query({
    name: 'publish_claimed',
    text: 'SELECT pg_notify($1, n) FROM json_array_elements_text($2::json) AS n',
    values: [NOTIFY_CHANNEL, JSON.stringify(claims.map((c) => deliveryNotification(deliveryView(c.row))))],
  });
}

/** A delivery whose attempt was lost with its runner, claimed under a drain's lease: the lost attempt is recorded first. */
async function takeOver(engine: DeliveryEngine, deliveryId: string, lease: SlotLease): Promise<ClaimedDelivery | null> {
  const db = engine.rt.db.relaxedPool;
  const outcome = await claimDelivery(db, deliveryId, lease.id);
  if (outcome.kind === 'later') await requeueAttemptJob(db, deliveryId, outcome.runAt);
  if (outcome.kind !== 'claimed') return null;
  if (outcome.claim.lostPrevious) await recordLostAttempt(engine, outcome.claim);
  return outcome.claim;
}

/** One delivery, claimed alone: strict FIFO order, throttling, or taking over a lost attempt. */
async function attemptOne(engine: DeliveryEngine, deliveryId: string): Promise<void> {
  const db = engine.rt.db.relaxedPool;
  const outcome = await claimDelivery(db, deliveryId);
  if (outcome.kind === 'later') await requeueAttemptJob(db, deliveryId, outcome.runAt);
  if (outcome.kind !== 'claimed') return;
  if (outcome.claim.lostPrevious) await recordLostAttempt(engine, outcome.claim);
  await sendTraced(engine, outcome.claim);
}

/** Normalised once per webhook object: a batch's claims share theirs. */
const retryPolicies = new WeakMap<ClaimedDelivery['webhook'], RetryPolicy>();
function retryPolicyOf(webhook: ClaimedDelivery['webhook']): RetryPolicy {
  let policy = retryPolicies.get(webhook);
  if (!policy) retryPolicies.set(webhook, (policy = normalizeRetryPolicy(webhook.retryPolicy)));
  return policy;
}

const decryptedSecrets = new Map<string, string>();
function signingSecret(sealed: string): string {
  let secret = decryptedSecrets.get(sealed);
  if (secret === undefined) {
    if (decryptedSecrets.size >= 1_000) decryptedSecrets.clear();
    secret = decryptSecret(sealed);
    decryptedSecrets.set(sealed, secret);
  }
  return secret;
}

/** sendClaimed inside a `delivery.attempt` span when tracing is on (src/tracing.ts). */
function sendTraced(engine: DeliveryEngine, claim: ClaimedDelivery, published?: Promise<void>, answered?: () => void): Promise<void> {
  if (!tracingEnabled()) return sendClaimed(engine, claim, published, answered);
  const attributes = { 'relay.delivery_id': claim.row.id, 'relay.event_id': claim.row.event_id, 'relay.webhook_id': claim.row.webhook_id, 'relay.attempt': claim.attempt };
  return withSpan('delivery.attempt', attributes, () => sendClaimed(engine, claim, published, answered));
}

/**
 * Builds, signs and sends one claimed delivery, then records the attempt. `answered` is told as
 * soon as the attempt holds no request open any more (before its result is written): a drain
 * hands the slot to its next attempt then.
 */
async function sendClaimed(engine: DeliveryEngine, claim: ClaimedDelivery, published?: Promise<void>, answered?: () => void): Promise<void> {
  const record = async (r: AttemptResult) => {
    answered?.();
    await published?.catch(() => {});
    return engine.recorder.record(r);
  };
  const policy = retryPolicyOf(claim.webhook);
  const startedAt = new Date();
  const base = { deliveryId: claim.row.id as string, delivery: claim.row, attempt: claim.attempt, startedAt };

  let dispatch: Dispatch;
  try {
    const built = await buildDispatch(engine, claim);
    if (built.kind === 'wait') {
      // Every Automation slot of the project is taken: the delivery goes back to waiting, as a job at runAt (this runner's slot is free meanwhile).
      answered?.();
      await published?.catch(() => {});
      await deferClaim(engine.rt.db.relaxedPool, claim.row.id, claim.attempt, built.runAt);
      return;
    }
    if (built.kind === 'drop') {
      await record({ ...base, durationMs: built.durationMs, statusCode: null, responseSnippet: null, error: built.reason, outcome: 'cancelled', automation: built.automation });
      return;
    }
    if (built.kind === 'failed') {
      const retry = !built.terminal && attemptRetryable(policy, claim.attempt);
      await record({
        ...base,
        durationMs: built.durationMs,
        statusCode: null,
        responseSnippet: null,
        error: built.error,
        outcome: retry ? 'retry' : 'failed',
        ...(retry ? { nextAttemptAt: new Date(Date.now() + retryDelayMs(policy, claim.attempt + 1)) } : {}),
        automation: built.automation,
      });
      return;
    }
    dispatch = built.dispatch;
  } catch (err) {
    await record({ ...base, durationMs: 0, statusCode: null, responseSnippet: null, error: (err as Error).message, outcome: 'failed' });
    return;
  }

  const res = await engine.senders.send(claim.row.destination ?? { id: '', name: '', type: 'webhook', config: {} }, {
    dispatch,
    signing: signingHeaders(claim.signingSecretsEnc.map(signingSecret), claim.row.event_id, dispatch.body),
    timeoutMs: claim.webhook.timeoutMs,
    ids: { deliveryId: claim.row.id, eventId: claim.row.event_id, webhookId: claim.row.webhook_id },
  });
  // The Automation run's record, written while the body was sent, before the attempt's.
  await dispatch.automationRecorded;
  await record({
    ...base,
    ...classify(res, policy, claim.attempt),
    durationMs: res.durationMs,
    statusCode: res.statusCode ?? null,
    responseSnippet: res.snippet ?? null,
    dispatch: snapshotToStore(claim, dispatch),
    automation: dispatch.automation ?? null,
  });
}

/** A failed subrequest of an Automation is retried like a network failure, within the policy's attempts. */
function attemptRetryable(policy: RetryPolicy, attempt: number): boolean {
  return isRetryable(policy, { kind: 'network' }) && attempt < policy.maxAttempts;
}

interface Dispatch {
  body: Buffer;
  contentType: string | null;
  headers: Record<string, string>;
  /** The body differs from the event's payload (a transform ran): it must be kept for replays. */
  transformed: boolean;
  /** The Automation version whose run produced the body. */
  automation?: { id: string; version: number };
  /** Settles once that run's record is written (written while the body is sent). */
  automationRecorded?: Promise<void>;
}

type Built =
  | { kind: 'dispatch'; dispatch: Dispatch }
  | { kind: 'drop'; reason: string; durationMs: number; automation: { id: string; version: number } }
  | { kind: 'failed'; error: string; terminal: boolean; durationMs: number; automation: { id: string; version: number } }
  | { kind: 'wait'; runAt: Date };

/**
 * The dispatch snapshot is written once, by the first attempt: its headers always, its body
 * only when a transform produced it (otherwise the retained event payload is those bytes).
 */
function snapshotToStore(claim: ClaimedDelivery, d: Dispatch): AttemptResult['dispatch'] {
  if (claim.hasDispatch || claim.dispatchHeaders) return null;
  return { body: d.transformed ? d.body : null, contentType: d.contentType, headers: d.headers };
}

/**
 * The bytes and headers to send: the stored dispatch snapshot (retries, replays: no transform
 * runs again), else the event payload, transformed when a transform is set. An Automation may
 * instead drop the event, fail, or have to wait for a concurrency slot.
 */
async function buildDispatch(engine: DeliveryEngine, claim: ClaimedDelivery): Promise<Built> {
  if (claim.body === null) throw new Error('the retained payload is gone');
  if (claim.hasDispatch || claim.dispatchHeaders) {
    return {
      kind: 'dispatch',
      dispatch: {
        body: claim.body,
        contentType: claim.contentType,
        headers: claim.dispatchHeaders ?? (claim.contentType ? { 'content-type': claim.contentType } : {}),
        transformed: claim.hasDispatch,
      },
    };
  }
  let body = claim.body;
  let contentType = claim.contentType;
  let transformed = false;
  let automation: { id: string; version: number } | undefined;
  let automationRecorded: Promise<void> | undefined;
  const transform = claim.webhook.transform as { kind?: unknown; expression?: unknown; automationId?: unknown; version?: unknown } | null;
  if (transform?.kind === 'jsonata' && typeof transform.expression === 'string') {
    ({ body, contentType } = await transformPayload(transform, body));
    transformed = true;
  } else if (transform?.kind === 'automation' && typeof transform.automationId === 'string' && typeof transform.version === 'number') {
    automation = { id: transform.automationId, version: transform.version };
    const started = performance.now();
    let out: AutomationOutcome;
    try {
      out = await runAutomation(engine.rt, {
      projectId: claim.row.project_id,
      automationId: automation.id,
      version: automation.version,
      deliveryId: claim.row.id,
      mode: 'delivery',
      webhookId: claim.row.webhook_id,
      rawBody: body,
      event: {
        id: claim.row.event_id,
        receivedAt: new Date(claim.event.receivedAt).toISOString(),
        channel: claim.event.channel,
        method: claim.event.method,
        path: claim.event.path,
        query: claim.event.query,
        headers: claim.eventHeaders,
        contentType: claim.contentType,
        body: bodyForMatching(body),
      },
    });
    } catch (err) {
      // The run could not be made (the database, a lease, the engine): not an error of the code,
      // so the webhook's retry policy decides, and the attempt names the pinned version.
      log.warn({ err, deliveryId: claim.row.id }, 'an automation run could not be made; the attempt is retried by the retry policy');
      return { kind: 'failed', error: `automation could not run: ${(err as Error)?.message ?? String(err)}`, terminal: false, durationMs: Math.round(performance.now() - started), automation };
    }
    const durationMs = Math.round(performance.now() - started);
    if (out.kind === 'wait') return out;
    if (out.kind === 'drop') return { kind: 'drop', reason: out.reason, durationMs, automation };
    if (out.kind === 'failed') return { kind: 'failed', error: out.error, terminal: out.terminal, durationMs, automation };
    ({ body, contentType, recorded: automationRecorded } = out);
    transformed = true;
  }
  const destHeaders = (claim.row.destination?.config?.headers ?? {}) as Record<string, string>;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...claim.webhook.customHeaders, ...destHeaders })) headers[k.toLowerCase()] = String(v);
  if (contentType) headers['content-type'] = contentType;
  return { kind: 'dispatch', dispatch: { body, contentType, headers, transformed, automation, automationRecorded } };
}

function classify(res: OutboundResult, policy: RetryPolicy, attempt: number): Pick<AttemptResult, 'outcome' | 'error' | 'nextAttemptAt' | 'failure'> {
  const c = classifyOutcome(res, policy, attempt);
  return res.failure ? { ...c, failure: res.failure } : c;
}

function classifyOutcome(res: OutboundResult, policy: RetryPolicy, attempt: number): Pick<AttemptResult, 'outcome' | 'error' | 'nextAttemptAt'> {
  if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) return { outcome: 'succeeded', error: null };
  let failure: FailureKind;
  let error: string | null = res.error ?? null;
  if (res.failure === 'blocked') failure = { kind: 'terminal' };
  else if (res.failure === 'timeout') failure = { kind: 'timeout' };
  else if (res.failure === 'network') failure = { kind: 'network' };
  else {
    failure = { kind: 'status', status: res.statusCode! };
    if (res.statusCode! >= 300 && res.statusCode! < 400) error = `redirect (HTTP ${res.statusCode}) not followed`;
    else error = res.error ?? `HTTP ${res.statusCode}`;
  }
  if (!isRetryable(policy, failure) || attempt >= policy.maxAttempts) return { outcome: 'failed', error };
  let delay = retryDelayMs(policy, attempt + 1);
  const retryAfter = res.headers?.['retry-after'];
  if (retryAfter && (res.statusCode === 429 || res.statusCode === 503)) {
    const seconds = Number(retryAfter);
    const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(String(retryAfter)) - Date.now();
    if (Number.isFinite(ms) && ms > 0) delay = Math.min(Math.max(delay, ms), MAX_RETRY_AFTER_MS);
  }
  return { outcome: 'retry', error, nextAttemptAt: new Date(Date.now() + delay) };
}

/** A runner died during the previous attempt: record it as a lost (network) attempt before going on. */
async function recordLostAttempt(engine: DeliveryEngine, claim: ClaimedDelivery) {
  try {
    await engine.rt.db.pool.query(
      `INSERT INTO delivery_attempts (id, delivery_id, number, started_at, duration_ms, status_code, error, outcome)
       VALUES ($1, $2, $3, now(), NULL, NULL, 'attempt interrupted: the runner stopped before it finished', 'retry')
       ON CONFLICT (delivery_id, number) DO NOTHING`,
      [newId('att'), claim.row.id, claim.attempt - 1],
    );
  } catch (err) {
    log.warn({ err, deliveryId: claim.row.id }, 'could not record the lost attempt');
  }
}
