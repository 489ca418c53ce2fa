import { log } from '../log.ts';
import { automationRoom } from '../automations/run.ts';
import { claimDelivery, LEASE_MARGIN_MS, type ClaimedDelivery } from './claim.ts';
import { announceDirectClaim, claimDeliveryBatch, DRAIN_MAX_IN_FLIGHT, handOffDueDeliveries, heldJobsMargin, takeOverBacklogJobs, type DirectClaimConfig } from './claim-batch.ts';
import type { DeliveryRow } from './delivery-view.ts';
import type { DirectClaim, DirectClaimStored } from '../runtime.ts';
import { deferClaim } from './defer.ts';
import { Drain, Slots } from './drain.ts';
import type { DeliveryEngine } from './engine.ts';
import { requeueAttemptJob, requeueWebhookAttemptJobs } from './job.ts';
import { recordLostAttempt, sendTraced } from './send-attempt.ts';
import { acquireSlotLease, canStart, LEASE_RENEW_MS, releaseSlotLease, renewSlotLease, shrinkSlotLease, type SlotLease } from './slot-lease.ts';

/** How long one job drains its webhook before handing on to a new job (other webhooks get their turn). */
export const DRAIN_BUDGET_MS = 5_000;


/**
 * How long a drain with nothing to do waits for the webhook's next job before it ends: under a
 * steady rate the next event comes within it, and the drain (its lease) carries on rather than
 * ending and starting again per event.
 */
const LINGER_MS = 25;

/** How much work a drain keeps claimed ahead of its slots, in time at its attempts' pace (see window in runDrain). */
const CLAIM_AHEAD_MS = 1_000;

/** How long a claim holds its delivery: batch claims (claim-batch.ts) and one-at-a-time ones (claim.ts). */
const BATCH_CLAIM_LEASE_MS = (timeoutMs: number) => 2 * timeoutMs + LEASE_MARGIN_MS;
const SINGLE_CLAIM_LEASE_MS = (timeoutMs: number) => timeoutMs + LEASE_MARGIN_MS;

/**
 * How long after its previous claim a drain claims deliveries named to it since (handed over by
 * ingest, or named by their jobs): at a steady few hundred events per second, several share a
 * claim statement instead of each costing one. A backlog's claims are not held back.
 */
const CLAIM_LINGER_MS = 5;

/** How long a drain whose time is up waits for its last answers before it gives their spare slots back and hands on (see runDrain). */
const TAIL_GRACE_MS = 100;

/** How many of a backlog's queued deliveries one statement of takeOverBacklogJobs looks at (and deletes the jobs of). */
const TAKEOVER_CHUNK = 5_000;

/** When a drain found every slot of its webhook leased by other runners' drains: its deliveries' jobs run again after about this. */
const SLOTS_BUSY_RETRY_MS = 100;

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
      // they stop first, a job comes back for them.
      if (grant.kind === 'busy') await handOffDueDeliveries(db, drained, new Date(Date.now() + SLOTS_BUSY_RETRY_MS * (1 + Math.random())));
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
  // How long an attempt takes here (answers seen so far, a moving average): the drain keeps about
  // a second of attempts claimed ahead, so that a backlog is claimed (and its jobs deleted) in
  // large batches, while a slow receiver's deliveries do not wait long in line.
  let answers = 0;
  let attemptMs = 0;
  const window = () => {
    const ahead = answers < slots.size ? 2 * slots.size : Math.floor((slots.size * CLAIM_AHEAD_MS) / Math.max(attemptMs, 1));
    return Math.min(DRAIN_MAX_IN_FLIGHT, Math.max(2 * slots.size, ahead));
  };
  /**
   * Runs a claimed delivery (or one being claimed: a lost attempt taken over) in one of the drain's
   * slots; `claimedAt`: when its claim was asked for, by the local clock (its lease runs from the
   * database's clock a moment later).
   */
  const start = (claimed: ClaimedDelivery | Promise<ClaimedDelivery | null>, leaseMs: (timeoutMs: number) => number, claimedAt = Date.now()) => {
    pending++;
    let slot = false;
    let sentAt = 0;
    let done = false;
    // The attempt holds no request open any more: its slot goes to the next one at once.
    const answer = () => {
      if (done) return;
      done = true;
      pending--;
      if (sentAt) {
        answers++;
        attemptMs = answers === 1 ? Date.now() - sentAt : attemptMs * 0.9 + (Date.now() - sentAt) * 0.1;
      }
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
      // Its claim must outlive the attempt too: past it, the sweeper may have given it to another runner.
      const claimOutlives = Date.now() + claim.webhook.timeoutMs + 1_000 < claimedAt + leaseMs(claim.webhook.timeoutMs);
      if (signal?.aborted || drain.stopping || !canStart(lease, claim.webhook.timeoutMs) || !claimOutlives) {
        // Shutting down, the lease could not be renewed, or it waited too long: this one waits for another drain.
        answer();
        await deferClaim(db, claim.row.id, claim.attempt, new Date());
        return;
      }
      sentAt = Date.now();
      await sendTraced(engine, claim, answer);
    })().finally(answer);
    const tracked = run.catch((err) => log.error({ err }, 'delivery attempt failed')).finally(() => runs.delete(tracked));
    runs.add(tracked);
  };
  let handOff = false;
  let single = false;
  // The last claim took every due delivery it could: claim again only for deliveries named since.
  let exhausted = false;
  let lastClaimAt = 0;
  let lingered = false;
  /** The deliveries the claim under way was asked for: named again should it fail. */
  let asked: string[] = [];
  // A backlog (a claim came back full): the jobs of the webhook's queued deliveries are deleted in
  // the background, chunk by chunk in seq order, while the drain runs (see takeOverBacklogJobs).
  // It goes on while the drain takes deliveries (`accepting`: false once its loop ended or the
  // runner stops) and has time left.
  let takingOver: Promise<void> | null = null;
  const takeOverBacklog = async () => {
    for (let after: string | null = '0'; after !== null && drain.accepting && !signal?.aborted && Date.now() < deadline; ) {
      const chunk = await takeOverBacklogJobs(db, drained, after, TAKEOVER_CHUNK);
      engine.jobTable.noteDeleted(chunk.deleted);
      after = chunk.looked === TAKEOVER_CHUNK ? chunk.lastSeq : null;
    }
  };
  drain.whenStopped(() => slots.abandon());
  // Renewed on a timer of its own (with a slow receiver the loop may wait a whole timeout for an
  // answer), and at once when the webhook changed: until that renewal has answered, no attempt
  // starts (a paused webhook's lease is not renewed: what waits for a slot waits again).
  let renewing: Promise<unknown> | null = null;
  let changes = 0;
  // Changes heard without a version (this process's own, a deleted webhook), and the highest
  // config_version a change notification said: a claim's read of the webhook is kept for direct
  // claims only when neither says it may be out of date.
  let unversioned = 0;
  let heardVersion = -1;
  // The webhook as the last claim read it, while no change was heard since: what ingest's direct
  // claims start their attempts with (Drain.direct).
  let config: DirectClaimConfig | null = null;
  const renew = () => {
    const seen = changes;
    return renewSlotLease(db, lease)
      .then((kept) => {
        // A change came in while this renewal was under way: the next renewal decides.
        if (changes !== seen && kept > 0) lease.validUntil = 0;
        if (kept === 0) {
          // Lost: the loop ends now (it may be waiting for a slow answer) and hands the webhook on.
          slots.abandon();
          drain.wake();
        } else if (kept < slots.size) slots.size = kept;
      })
      .catch((err) => log.warn({ err }, 'could not renew a slot lease'));
  };
  const renewNow = (afterChange: boolean) => {
    if (renewing && !afterChange) return;
    const next: Promise<unknown> = (renewing ?? Promise.resolve()).then(renew).finally(() => {
      if (renewing === next) renewing = null;
    });
    renewing = next;
  };
  const renewal = setInterval(() => renewNow(false), LEASE_RENEW_MS);
  drain.whenChanged((version) => {
    changes++;
    if (version === undefined) unversioned++;
    else heardVersion = Math.max(heardVersion, version);
    // The notification of a change the last claim already read (its own commit's, heard late) leaves it.
    if (version === undefined || !config || version > config.version) config = null;
    lease.validUntil = 0;
    renewNow(true);
  });
  // Ingest in this process claims a new delivery for this drain in the statement that writes it,
  // while the webhook's queue was empty at the last claim and nothing is named to the drain (so it
  // never overtakes deliveries already waiting), the window has room, and the webhook is still at
  // the config_version the last claim read (the statement checks it: so the attempt starts with
  // exactly the settings and secrets a claim would read now). One statement fewer per delivery,
  // and no wait for the next claim.
  drain.direct = (configVersion: number): DirectClaim | null => {
    const cfg = config;
    if (!cfg || cfg.version !== configVersion || Date.now() >= cfg.validUntil || !drain.accepting || drain.stopping || !exhausted || drain.size > 0) return null;
    if (pending >= window() || automationRoom(engine.rt, drained, pending) <= 0 || !canStart(lease, cfg.webhook.timeoutMs)) return null;
    // Counted as pending from now: the drain does not end (nor give its lease back) while ingest
    // writes it (and one lingering for its next job carries on).
    pending++;
    drain.wake();
    const reservedAt = Date.now();
    let settled = false;
    const settle = () => {
      if (settled) return false;
      settled = true;
      pending--;
      return true;
    };
    return {
      leaseId: lease.id,
      leaseMs: BATCH_CLAIM_LEASE_MS(cfg.webhook.timeoutMs),
      start: (stored) => {
        if (!settle()) return;
        const claim = directClaim(stored, cfg, lease.id);
        const announced = stored.listened
          ? announceDirectClaim(db, claim.row.id).then(
              () => claim,
              (err) => (log.warn({ err, deliveryId: claim.row.id }, 'could not send a delivery change'), claim),
            )
          : claim;
        start(announced, BATCH_CLAIM_LEASE_MS, reservedAt);
      },
      cancel: () => {
        if (!settle()) return;
        drain.roomLeft = pending < window();
        drain.wake();
      },
    };
  };
  try {
    for (let round = 0; ; round++) {
      const windowRoom = window() - pending;
      const room = Math.min(windowRoom, automationRoom(engine.rt, drained, pending));
      // Claims come in batches: once half the window is free (the attempts next in line are
      // running), or, once the last claim took every due delivery, for deliveries named since. In
      // a backlog, named deliveries wait for the next batch (it takes them first): their jobs
      // hold this runner's job slots meanwhile, so the runner does not fetch (and complete) the
      // jobs of deliveries the batch would have taken anyway. (The half is of the window: a
      // project's Automation slots may hold `room` below it, and then each free one is claimed.)
      const claiming = room > 0 && !drain.stopping && (round === 0 || (exhausted ? drain.size > 0 : windowRoom >= Math.max(slots.size, window() / 2) || pending === 0)) && canStart(lease, timeoutMs);
      // Only named deliveries to claim (the last claim took every due one): a moment for more to
      // come, then the room, the lease and the state are looked at again.
      const linger = claiming && !lingered && round > 0 && exhausted ? lastClaimAt + CLAIM_LINGER_MS - Date.now() : 0;
      if (linger > 0) {
        await new Promise((r) => setTimeout(r, linger));
        lingered = true;
        continue;
      }
      lingered = false;
      if (claiming) {
        const named = drain.take();
        // As many as it has room for (a burst's hand-overs can name thousands): the rest are named again.
        const ids = round === 0 ? [deliveryId, ...named.ids] : named.ids;
        asked = ids.length > room ? ids.slice(0, room) : ids;
        if (asked !== ids) drain.putBack(ids.slice(room));
        const seen = unversioned;
        const batch = await claimDeliveryBatch(db, drained, asked, room, margin, lease.id).finally(named.release);
        lastClaimAt = Date.now();
        if (batch.kind === 'none') break; // the webhook is paused, archived or gone: resuming re-queues its deliveries
        if (batch.kind === 'single') {
          // Switched to strict FIFO or throttling: each delivery goes its own way, with its own job.
          stopDraining();
          single = true;
          for (const id of asked) await requeueAttemptJob(db, id, new Date());
          break;
        }
        engine.jobTable.noteDeleted(batch.jobsDeleted);
        // A change heard while the claim ran may not be in what it read (unless it says a version the claim read).
        config = unversioned === seen && heardVersion <= batch.config.version ? batch.config : null;
        drain.publicId = batch.publicId;
        drain.projectId = batch.projectId;
        timeoutMs = batch.claims[0]?.webhook.timeoutMs ?? timeoutMs;
        for (const id of batch.lost) start(takeOver(engine, id, lease), SINGLE_CLAIM_LEASE_MS);
        for (const n of batch.notDue) await requeueAttemptJob(db, n.id, n.at);
        // Their `delivering` notifications went out with the claim's commit, before any result.
        for (const claim of batch.claims) start(claim, BATCH_CLAIM_LEASE_MS);
        exhausted = batch.claims.length < room;
        if (!exhausted && !takingOver) {
          // From the head of the queue: what the claim took is no longer queued, and it may have
          // taken named deliveries far behind the head (their jobs had run).
          takingOver = takeOverBacklog().catch((err) => log.warn({ err, webhookId: drained }, 'could not take over the jobs of a backlog; its jobs run as usual'));
        }
        if (!exhausted && asked.length > 0) {
          // Full: named deliveries it had no room for are named again (their jobs are done).
          const taken = new Set([...batch.claims.map((c) => c.row.id as string), ...batch.lost, ...batch.notDue.map((n) => n.id)]);
          drain.putBack(asked.filter((id) => !taken.has(id)));
        }
        asked = [];
        drain.roomLeft = pending < window();
      }
      if (Date.now() > deadline || signal?.aborted || drain.stopping || lease.slots === 0) {
        handOff = true;
        break;
      }
      if (pending === 0) {
        if (drain.size && canStart(lease, timeoutMs)) continue;
        if (drain.size) {
          // The lease does not outlive an attempt (a longer timeout since it was granted): renew it first.
          await (renewing ?? new Promise((r) => setTimeout(r, 50)));
          continue;
        }
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
  } catch (err) {
    // A claim (or a re-queue after it) failed: what it was asked for is named again, and handed
    // on below with the rest (some may have no job: handed over by ingest in this process).
    drain.putBack(asked);
    handOff = true;
    throw err;
  } finally {
    // It claims nothing more: ingest here writes the webhook's deliveries with their jobs again
    // (another runner may take them) rather than handing them to this drain until its last answer.
    drain.accepting = false;
    drain.direct = null;
    // The webhook's work goes to a new drain now, not after this one's slowest answer: its next
    // jobs start one, and a hand-off job takes the deliveries named here.
    let handedOn = false;
    const handOnNow = async () => {
      stopDraining();
      const left = drain.take();
      try {
        await handOffDueDeliveries(db, drained);
        handedOn = true;
      } finally {
        // Not handed on: put back, the hand-off below takes them.
        if (!handedOn) drain.putBack(left.ids);
        left.release();
      }
    };
    // Should the database fail here, the drain ends the usual way below (the webhook handed on
    // once its last answer came).
    const early = (err: unknown) => log.warn({ err, webhookId: drained }, 'could not hand the webhook on early; it is handed on once its last answer came');
    if (lease.slots === 0) {
      // A lost lease: a new drain (under a new lease) takes over at once, while this one waits
      // for its attempts under way.
      if (pending > 0 && !single && !drain.stopping && !signal?.aborted) await handOnNow().catch(early);
      else stopDraining();
    } else if (handOff && !single && !drain.stopping && !signal?.aborted && pending > 0) {
      // Time is up and attempts are still open a moment later (a slow answer, up to the webhook's
      // timeout): the slots they do not need go back first. (A fast receiver's last answers come
      // within the moment: then the lease goes back whole, below, before the hand-off.)
      for (const until = Date.now() + TAIL_GRACE_MS; pending > 0 && Date.now() < until; drain.sleep()) {
        await Promise.race([drain.woken(), new Promise((r) => setTimeout(r, Math.max(until - Date.now(), 1)))]);
      }
      if (pending > 0) await shrinkSlotLease(db, lease, pending).then(handOnNow).catch(early);
    }
    // Every attempt answered (or, when shutting down, the waiting ones deferred): the slots go
    // back. The drain stays registered meanwhile, so that this runner's next jobs of the webhook
    // join it (and are handed on below) rather than find its slots still leased.
    while (pending > 0) {
      await drain.woken();
      drain.sleep();
    }
    clearInterval(renewal);
    await renewing;
    await takingOver;
    await releaseSlotLease(db, lease).catch((err) => log.warn({ err }, 'could not release a slot lease now; trying again in the background (it runs out by itself otherwise)'));
    stopDraining();
    // Deliveries named after the last claim: due, and their jobs ran. A new drain takes them at
    // once: every attempt was answered, and only results wait for their record statement (up to
    // RECORD_LINGER_MS), which these deliveries need not wait for. For a webhook that turned out
    // one-at-a-time, each gets its own job again once this drain's results are written. The job
    // ends once they are, whether the hand-off worked or not.
    const written = Promise.all(runs);
    const left = drain.take();
    if (left.ids.length) handOff = true;
    try {
      if (single) {
        await written;
        for (const id of left.ids) await requeueAttemptJob(db, id, new Date());
        // The jobs it took over: each waiting delivery without one gets its own again (strict FIFO: the head).
        if (takingOver) await requeueWebhookAttemptJobs(db, drained, { missingOnly: true });
      } else if (handOff && (!handedOn || left.ids.length)) await handOffDueDeliveries(db, drained);
      left.release();
    } finally {
      await written;
    }
  }
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

/** A delivery ingest claimed as it wrote it (Drain.direct), as a batch claim would have returned it. */
function directClaim(stored: DirectClaimStored, config: DirectClaimConfig, leaseId: string): ClaimedDelivery {
  const row: DeliveryRow = {
    ...stored.row,
    destination: stored.row.destination as DeliveryRow['destination'],
    status: 'delivering',
    attempts: 1,
    next_attempt_at: null,
    last_attempt: null,
    replay_of_id: null,
    created_at: stored.event.receivedAt,
    completed_at: null,
    slot_lease: leaseId,
  };
  return {
    row,
    attempt: 1,
    body: stored.body,
    contentType: stored.contentType,
    dispatchHeaders: null,
    hasDispatch: false,
    eventHeaders: stored.eventHeaders,
    event: stored.event,
    signingSecretsEnc: config.signingSecretsEnc,
    webhook: config.webhook,
    lostPrevious: false,
  };
}
