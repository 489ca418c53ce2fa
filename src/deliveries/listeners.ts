import type pg from 'pg';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';

/**
 * Who listens to deliveryUpdated: each process keeps one row per project it has subscribers of in
 * `delivery_listeners`, renewed while they last. The statements that change a delivery (claims,
 * results) send its change notification only when its project has a live row: a pipeline nobody
 * watches sends no notification per delivery (building each, queueing it, and every listening
 * process reading and parsing it cost about a fifth of a delivery's work).
 *
 * A subscription counts from the moment its row is written (the subscribe resolver waits for it):
 * changes made by statements that started before may not be reported, as with any subscription
 * set up while they ran.
 */

/** How long a row outlives its last renewal: a process that died stops costing notifications after this. */
const LISTENER_TTL_S = 60;
/** How often a process renews its rows (and writes again those it could not write). */
const RENEW_MS = 20_000;
/** How soon it tries again after a write failed (the database was out). */
const RETRY_MS = 2_000;
/** A write taking longer is given up (and tried again): one hung write would hold up every later subscription of the process. */
const WRITE_TIMEOUT_MS = 10_000;

/** SQL: whether some process has a deliveryUpdated subscriber of the project `projectIdSql` now. */
export const deliveryListenedSql = (projectIdSql: string) =>
  `EXISTS (SELECT 1 FROM delivery_listeners l WHERE l.project_id = ${projectIdSql} AND l.expires_at > now())`;

/** Removes the rows of processes that died without removing their own (the delivery sweeper runs it). */
export async function deleteExpiredDeliveryListeners(client: pg.Pool | pg.PoolClient): Promise<void> {
  await client.query(`DELETE FROM delivery_listeners WHERE expires_at < now() - interval '1 minute'`);
}

class DeliveryListeners {
  private readonly processId = newId('prc');
  /** Subscribers per project in this process. */
  private readonly counts = new Map<string, number>();
  /** The registry's writes, one at a time and in order: a row's removal never overtakes its (re)insertion. */
  private chain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;

  constructor(private readonly db: pg.Pool) {}

  /** Counts a subscriber of the project; resolves once its row is written (or the write failed and is retried). Returns its release. */
  async watch(projectId: string): Promise<() => void> {
    const n = (this.counts.get(projectId) ?? 0) + 1;
    this.counts.set(projectId, n);
    await this.write(() => this.upsert([projectId]));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.counts.get(projectId) ?? 1) - 1;
      if (left > 0) {
        this.counts.set(projectId, left);
        return;
      }
      this.counts.delete(projectId);
      void this.write(async () => {
        if (this.counts.has(projectId)) return;
        await this.db.query({
          text: 'DELETE FROM delivery_listeners WHERE project_id = $1 AND process_id = $2',
          values: [projectId, this.processId],
          query_timeout: WRITE_TIMEOUT_MS,
        } as pg.QueryConfig);
      });
    };
  }

  private upsert(projectIds: string[]) {
    const live = projectIds.filter((p) => this.counts.has(p));
    if (live.length === 0) return Promise.resolve();
    return this.db
      .query({
        text: `INSERT INTO delivery_listeners (project_id, process_id, expires_at)
               SELECT p, $2, now() + make_interval(secs => $3) FROM unnest($1::text[]) p
               ON CONFLICT (project_id, process_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
        values: [live, this.processId, LISTENER_TTL_S],
        query_timeout: WRITE_TIMEOUT_MS,
      } as pg.QueryConfig)
      .then(() => undefined);
  }

  /** Runs a write after the previous ones; a failure is logged and the renewal comes sooner. Never rejects. */
  private write(op: () => Promise<void>): Promise<void> {
    const next = this.chain.then(op).then(
      () => this.schedule(RENEW_MS),
      (err) => {
        log.warn({ err }, 'deliveryUpdated listener registry: write failed, retrying');
        this.schedule(RETRY_MS);
      },
    );
    this.chain = next;
    return next;
  }

  /** Renews every row of this process within `ms` (a renewal due sooner stays). */
  private schedule(ms: number) {
    if (this.counts.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
      return;
    }
    const at = Date.now() + ms;
    if (this.timer && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.write(() => this.upsert([...this.counts.keys()]));
    }, ms);
    this.timer.unref();
  }
}

const registries = new WeakMap<Runtime, DeliveryListeners>();

/** This process's deliveryUpdated listener registry. */
export function deliveryListeners(rt: Runtime): DeliveryListeners {
  let r = registries.get(rt);
  if (!r) registries.set(rt, (r = new DeliveryListeners(rt.db.pool)));
  return r;
}

/** `inner`, calling `release` once when it ends (returned, thrown into, or run out). */
export function releasingIterator<T>(inner: AsyncIterableIterator<T>, release: () => void): AsyncIterableIterator<T> {
  const it: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => it,
    next: async () => {
      const r = await inner.next();
      if (r.done) release();
      return r;
    },
    return: async (value?: unknown) => {
      release();
      return (await inner.return?.(value)) ?? { value: undefined, done: true };
    },
    throw: async (err?: unknown) => {
      release();
      if (inner.throw) return inner.throw(err);
      throw err;
    },
  };
  return it;
}
