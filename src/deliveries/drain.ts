import type { DirectClaim } from '../runtime.ts';

// A drain's bookkeeping on one runner: the deliveries its webhook's jobs name to it, and the
// slots of its lease (slot-lease.ts) handed from attempt to attempt. The run itself: batch-run.ts.

/** How long a job that named its delivery to a drain waits for the drain to take it up. */
const JOIN_WAIT_MS = 50;

/**
 * A job draining one parallel webhook on this runner; the webhook's other jobs name their
 * delivery to it. They wait (briefly) until a claim took their delivery up: while they hold
 * the runner's job slots, graphile-worker does not run through the queue ahead of the drain,
 * whose claims delete the jobs of the deliveries they take, so most jobs never run.
 */
export class Drain {
  private waiting = new Map<string, () => void>();
  private wakeUp: (() => void) | null = null;
  /** A wake that came while the loop was not waiting (in a claim, say): its next wait returns at once. */
  private woke = false;
  /**
   * The drain could claim more now: a delivery named now wakes it, rather than waiting for an
   * attempt in flight to finish (which, with a slow receiver, could take the webhook's whole
   * timeout). Whether it claims at once is the drain's (batch-run.ts: in a backlog it waits for
   * its next batch). True from the start: one named while the first claim runs is claimed next.
   */
  roomLeft = true;

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

  /**
   * Resolves at the next wake: a join the drain can claim at once, or an attempt answered; at
   * once when one came since the last wait ended (a wake is never lost while the loop is busy).
   */
  woken(): Promise<void> {
    if (this.woke) {
      this.woke = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.wakeUp = () => {
        this.wakeUp = null;
        resolve();
      };
    });
  }

  wake(): void {
    if (this.wakeUp) this.wakeUp();
    else this.woke = true;
  }

  /** The runner is shutting down: claim nothing more, and what waits for a slot goes back to wait for another runner. */
  stopping = false;

  /**
   * Reserves room for a delivery ingest claims for this drain as it writes it (set by its loop:
   * batch-run.ts), when the webhook is still at `configVersion` as the drain last read it.
   */
  direct: ((configVersion: number) => DirectClaim | null) | null = null;

  /** Takes deliveries handed over by ingest (offer): false once its loop ended or the runner stops (it claims nothing more). */
  accepting = true;
  private onStop: (() => void) | null = null;

  stop(): void {
    this.stopping = true;
    this.accepting = false;
    this.onStop?.();
    this.wake();
  }

  whenStopped(fn: () => void): void {
    this.onStop = fn;
  }

  private onChange: ((version?: number) => void) | null = null;

  /** The webhook's publicId and project, once a claim read them: notifications of changes name webhooks by them. */
  publicId: string | null = null;
  projectId: string | null = null;

  /**
   * The webhook's settings or state changed (paused, archived, maxInFlight lowered): the drain
   * checks its lease before it starts another attempt. `version`: the config_version the change
   * made, when the notification says it.
   */
  changed(version?: number): void {
    this.onChange?.(version);
  }

  whenChanged(fn: (version?: number) => void): void {
    this.onChange = fn;
  }

  /** Its wait ended otherwise (a timer won the race): a wake from now on is kept for its next wait. */
  sleep(): void {
    this.wakeUp = null;
  }

  /**
   * A delivery ingest handed over in this process (see handOverToDrain): named like a job's, but
   * nothing waits for it; its job row, not yet run, is deleted by the claim that takes it.
   */
  offer(deliveryId: string): void {
    this.putBack([deliveryId]);
    if (this.roomLeft) this.wake();
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
export class Slots {
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
