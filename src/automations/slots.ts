import type pg from 'pg';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { RUN_WALL_MS } from './limits.ts';

/**
 * A project's Automation concurrency slots, as this process holds them.
 *
 * The count is kept in PostgreSQL across every runner and API process: each slot is a lease row
 * (automation_leases), and automation_leases_take grants a process at most what is free under
 * the project's limit. A process takes slots a block at a time (as many as it has runs asking
 * in one turn of its event loop, in one statement), hands a slot that a run finished with to its
 * next run directly, and gives back the slots nobody used for LINGER_MS in one statement: a
 * burst of runs costs a statement per block, not one (or two) per run.
 *
 * A run uses a slot from start to end, so across every process no more runs than the limit are
 * under way at once. A run that finds no slot (this process holds the limit, all in use, or
 * PostgreSQL grants none) is answered at once: it waits as a job, never in the process.
 */

/** A lease outlives the longest run (its wall time, and the margin before a stuck worker is replaced). */
export const LEASE_TTL_MS = RUN_WALL_MS + 20_000;
/** A held slot starts a run only while its lease has this much life left; else it is replaced. */
const MIN_LIFE_MS = RUN_WALL_MS + 5_000;
/** How long a slot nobody uses stays with this process before it is given back. */
export const LINGER_MS = 100;

interface Lease {
  id: string;
  /** When the lease ends at the latest, by this process's clock (from when the take was sent). */
  expiresAt: number;
  /** When its last run ended. */
  freedAt: number;
}

interface Asker {
  resolve: (lease: Lease | null) => void;
  reject: (err: unknown) => void;
}

/** One run's slot: give it back with release() (once; later calls do nothing). */
export interface Slot {
  release(): void;
}

class ProjectSlots {
  /** Held, not in use. */
  private free: Lease[] = [];
  private inUse = 0;
  /** Asked in this turn, not yet sent. */
  private asking: Asker[] = [];
  /** Leases asked in the statement being sent (counted against the limit until it answers). */
  private requested = 0;
  private taking = false;
  private lingerTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly owner: SlotPool,
    private readonly projectId: string,
  ) {}

  get idle(): boolean {
    return this.free.length === 0 && this.inUse === 0 && this.asking.length === 0 && this.requested === 0;
  }

  /** How many more runs this process could start now (optimistic about other processes). */
  room(limit: number): number {
    return Math.max(0, limit - this.inUse - this.asking.length - this.requested);
  }

  take(limit: number): Promise<Lease | null> | Lease | null {
    const now = Date.now();
    while (this.free.length > 0) {
      const lease = this.free.pop()!;
      if (lease.expiresAt - now >= MIN_LIFE_MS) {
        this.inUse++;
        return lease;
      }
      this.owner.giveBack([lease.id]);
    }
    if (this.inUse + this.asking.length + this.requested >= limit) return null;
    return new Promise((resolve, reject) => {
      this.asking.push({ resolve, reject });
      if (!this.taking) {
        this.taking = true;
        // Every run asking in this turn of the event loop shares one statement.
        setImmediate(() => void this.takeBlock(limit));
      }
    });
  }

  private async takeBlock(limit: number) {
    while (this.asking.length > 0) {
      const askers = this.asking.splice(0);
      const ids = askers.map(() => newId('alz'));
      this.requested += ids.length;
      const sentAt = Date.now();
      let granted: string[];
      try {
        const { rows } = await this.owner.db.query({
          name: 'automation_leases_take',
          text: 'SELECT automation_leases_take($1, $2::text[], $3, $4) AS ids',
          values: [this.projectId, ids, limit, LEASE_TTL_MS],
        });
        granted = rows[0].ids as string[];
      } catch (err) {
        this.requested -= ids.length;
        for (const a of askers) a.reject(err);
        continue;
      }
      this.requested -= ids.length;
      askers.forEach((a, i) => {
        if (i < granted.length) {
          this.inUse++;
          a.resolve({ id: granted[i], expiresAt: sentAt + LEASE_TTL_MS, freedAt: 0 });
        } else a.resolve(null);
      });
    }
    this.taking = false;
    this.owner.forgetIfIdle(this.projectId, this);
  }

  put(lease: Lease) {
    const now = Date.now();
    // A run asking in this turn (its statement not sent yet) takes the slot at once.
    if (this.asking.length > 0 && lease.expiresAt - now >= MIN_LIFE_MS) {
      this.asking.shift()!.resolve(lease);
      return;
    }
    this.inUse--;
    lease.freedAt = now;
    this.free.push(lease);
    this.armLinger(LINGER_MS);
  }

  private armLinger(ms: number) {
    if (this.lingerTimer) return;
    this.lingerTimer = setTimeout(() => this.linger(), ms);
    this.lingerTimer.unref();
  }

  /** Gives back the slots unused for LINGER_MS (those used meanwhile were taken off `free`). */
  private linger() {
    this.lingerTimer = null;
    const now = Date.now();
    const unused = this.free.filter((l) => now - l.freedAt >= LINGER_MS);
    if (unused.length > 0) {
      this.free = this.free.filter((l) => now - l.freedAt < LINGER_MS);
      this.owner.giveBack(unused.map((l) => l.id));
    }
    if (this.free.length > 0) this.armLinger(Math.max(1, LINGER_MS - (now - Math.min(...this.free.map((l) => l.freedAt)))));
    this.owner.forgetIfIdle(this.projectId, this);
  }

  /** Gives back every slot not in use now (shutdown, tests). */
  drop() {
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    const unused = this.free.splice(0);
    if (unused.length > 0) this.owner.giveBack(unused.map((l) => l.id));
  }
}

/** This process's slots of every project (see ProjectSlots). */
export class SlotPool {
  private projects = new Map<string, ProjectSlots>();
  private returning = new Set<Promise<void>>();

  constructor(readonly db: pg.Pool) {}

  private of(projectId: string): ProjectSlots {
    let p = this.projects.get(projectId);
    if (!p) this.projects.set(projectId, (p = new ProjectSlots(this, projectId)));
    return p;
  }

  /** How many more of the project's runs this process could start now (its limit minus what it uses and asks). */
  room(projectId: string, limit: number): number {
    return this.projects.get(projectId)?.room(limit) ?? limit;
  }

  /**
   * One of the project's `limit` slots for a run, or null at once when none is free (this
   * process uses them all, or PostgreSQL grants none: other processes hold them). Throws when
   * the statement fails.
   */
  async acquire(projectId: string, limit: number): Promise<Slot | null> {
    const p = this.of(projectId);
    const lease = await p.take(limit);
    if (!lease) {
      this.forgetIfIdle(projectId, p);
      return null;
    }
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        p.put(lease);
      },
    };
  }

  forgetIfIdle(projectId: string, p: ProjectSlots) {
    if (p.idle && this.projects.get(projectId) === p) this.projects.delete(projectId);
  }

  giveBack(ids: string[]) {
    const done: Promise<void> = this.db
      .query({ name: 'automation_leases_give_back', text: 'DELETE FROM automation_leases WHERE id = ANY($1::text[])', values: [ids] })
      .then(
        () => {},
        (err) => log.warn({ err }, 'could not give back automation leases (they expire by themselves)'),
      )
      .finally(() => this.returning.delete(done));
    this.returning.add(done);
  }

  /** Gives back every held slot not in use, and waits for the statements giving slots back. */
  async settle(): Promise<void> {
    for (const p of this.projects.values()) p.drop();
    await Promise.all([...this.returning]);
  }
}
