import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.ts';
import { OWN_APPLICATION_NAME } from './session-name.ts';
import { parseUtcTimestamp } from './timestamps.ts';

export type { PrismaClient };

// BIGINT columns (counters, sequence numbers) as JS numbers: they stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
// Prisma's DateTime columns are `timestamp(3)` holding UTC wall time: read and write them as UTC
// whatever the process's time zone.
pg.types.setTypeParser(pg.types.builtins.TIMESTAMP, parseUtcTimestamp);
pg.defaults.parseInputDatesAsUTC = true;

export interface Database {
  prisma: PrismaClient;
  /** Plain pg pool for hot paths written in SQL (ingest, claiming deliveries, counters). */
  pool: pg.Pool;
  /**
   * Connections whose commits do not wait for the disk, for delivery bookkeeping that is safe
   * to redo after a database crash (a lost claim or result means the attempt is made again:
   * at least once). Never for accepting events.
   */
  relaxedPool: pg.Pool;
  /**
   * Connections to the server itself (DATABASE_DIRECT_URL), for what a transaction pooler cannot
   * carry: session-level advisory locks held across statements, and graphile-worker's own
   * utilities. The same pool as `pool` when there is no pooler; else small and opened on demand.
   */
  direct: pg.Pool;
  url: string;
  /** The server itself: `url` unless a pooler sits in it. */
  directUrl: string;
  /** Whether `url` goes through a transaction pooler (a `directUrl` that differs). */
  pooled: boolean;
  /** Opens the connections each pool keeps (its `min`), all at once; resolves when they are open (failures are left to later queries). */
  warm(): Promise<void>;
  close(): Promise<void>;
}

/**
 * How long a pooled connection may sit idle before it is closed (pg's default is 10 s). A new
 * connection costs a backend start, authentication and, for each named statement, a parse and
 * plan: under a steady load whose concurrency wavers, a 10 s timeout closed connections that the
 * next wave had to open again, in the middle of the traffic (issue 14).
 */
const IDLE_TIMEOUT_MS = 5 * 60_000;

/**
 * The session setting of the service's own pools: each prepared statement gets one generic plan
 * per connection (and one again after an invalidation), never the five custom plans PostgreSQL
 * makes first by default, each costing a planning (the batch claim about 6 ms, an ingest
 * statement up to 3 ms): a step in the load brings connections that never ran a statement into
 * use at once. The statements are written for a generic plan (ingest keeps its values out of the
 * planner's sight, see ingest-check.ts), and partitions are pruned when they run.
 */
const GENERIC_PLANS = ' -c plan_cache_mode=force_generic_plan';

/**
 * A connection through a transaction pooler (PgBouncer in transaction mode, 1.18 and later):
 * consecutive transactions of one client may run on different server connections, so nothing
 * may outlive a transaction. Two things pg would otherwise do are changed here, once for every
 * query of the process (Prisma's included):
 * - named prepared statements (`query({ name, ... })`) are sent unnamed: a statement prepared on
 *   one server connection is unknown on the next (PgBouncer before 1.21 does not track them);
 *   the unnamed extended protocol is parsed and run in one go, so it needs nothing kept;
 * - the time zone goes as the `TimeZone` startup parameter, which PgBouncer tracks and sets on
 *   every server connection it lends this client, instead of `options` (which it refuses).
 */
class PoolerClient extends pg.Client {}
const base = pg.Client.prototype as unknown as { query(...args: unknown[]): unknown; getStartupConf(): Record<string, string> };
Object.assign(PoolerClient.prototype, {
  getStartupConf(this: typeof base) {
    return { ...base.getStartupConf.call(this), TimeZone: 'UTC' };
  },
  query(this: typeof base, config: unknown, ...rest: unknown[]) {
    // Query objects (`submit`) are passed on as they are; none here is named.
    if (config && typeof config === 'object' && 'name' in config && typeof (config as { submit?: unknown }).submit !== 'function') {
      const { name: _name, ...unnamed } = config as { name?: string };
      return base.query.call(this, unnamed, ...rest);
    }
    return base.query.call(this, config, ...rest);
  },
});

export interface ConnectOptions {
  /** The server itself when `url` goes through a transaction pooler (DATABASE_DIRECT_URL); default: `url`. */
  directUrl?: string;
  /**
   * Whether this process runs a job runner (default true). A runner's relaxed pool connects to the
   * server directly; an API-only process behind a pooler sends its few relaxed statements (runner
   * wake-ups) through the pooler as ordinary ones, whose commits wait for the disk.
   */
  runner?: boolean;
}

/**
 * `relaxedPoolSize`: the relaxed pool also carries a job runner's own bookkeeping, so a process
 * that runs one sizes it to the runner's concurrency (graphile-worker warns below that).
 */
export function connectDatabase(url: string, poolSize = 20, relaxedPoolSize = poolSize, keepOpen = 0, opts: ConnectOptions = {}): Database {
  const directUrl = opts.directUrl || url;
  const pooled = directUrl !== url;
  const quiet = (p: pg.Pool) => {
    // Connection errors surface on the next query; these handlers keep them from crashing the process.
    p.on('error', () => {});
    p.on('connect', (client) => client.on('error', () => {}));
    return p;
  };
  // Timestamps are stored as UTC wall time (Prisma's `timestamp(3)`); every session speaks UTC.
  // `min`: the connections a pool keeps open however long they idle (opened by `warm`).
  const session = (extra: string): pg.PoolConfig => (pooled ? { Client: PoolerClient } : { options: `-c TimeZone=UTC${extra}` });
  const poolConfig: pg.PoolConfig = { connectionString: url, application_name: OWN_APPLICATION_NAME, max: poolSize, idleTimeoutMillis: IDLE_TIMEOUT_MS, ...session('') };
  // Generic plans (GENERIC_PLANS) on this pool and the relaxed one, the service's own statements; not Prisma's.
  const pool = quiet(new pg.Pool({ ...poolConfig, ...session(GENERIC_PLANS), min: Math.min(keepOpen, poolSize) }));
  const relaxedOnDirect = !pooled || opts.runner !== false;
  const relaxedPool = relaxedOnDirect
    ? quiet(
        new pg.Pool({
          connectionString: directUrl,
          application_name: OWN_APPLICATION_NAME,
          max: relaxedPoolSize,
          min: Math.min(keepOpen, relaxedPoolSize),
          idleTimeoutMillis: IDLE_TIMEOUT_MS,
          options: `-c TimeZone=UTC -c synchronous_commit=off${GENERIC_PLANS}`,
        }),
      )
    : pool;
  // The session-level locks and graphile-worker's utilities: a few connections of their own, on the
  // server itself, opened when needed. Never the pool's: a job holding a lock connection runs its
  // work on the pool, and two such jobs holding the last two of a small pool (the alerts evaluation
  // and a retention pass on a runner with DATABASE_POOL_SIZE 2) would each wait for the other's.
  const direct = quiet(new pg.Pool({ connectionString: directUrl, application_name: OWN_APPLICATION_NAME, max: 4, idleTimeoutMillis: 30_000, options: '-c TimeZone=UTC' }));
  const prisma = new PrismaClient({ adapter: new PrismaPg(poolConfig) });
  const pools = [...new Set([pool, relaxedPool, direct])];
  return {
    prisma,
    pool,
    relaxedPool,
    direct,
    url,
    directUrl,
    pooled,
    async warm() {
      const open = async (p: pg.Pool, n: number) => {
        const clients = await Promise.all(Array.from({ length: n }, () => p.connect().catch(() => null)));
        for (const c of clients) c?.release();
      };
      await Promise.all([open(pool, Math.min(keepOpen, poolSize)), relaxedPool !== pool && open(relaxedPool, Math.min(keepOpen, relaxedPoolSize))]);
    },
    async close() {
      await Promise.allSettled([prisma.$disconnect(), ...pools.map((p) => p.end())]);
    },
  };
}

/** Runs `fn` in one transaction on a pooled client. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

/** Errors graphile-worker retries itself after 3 s and more (up to 2 minutes), not at its next poll. */
const SLOW_RETRIED = new Set(['57P03', 'ETIMEDOUT', 'EHOSTUNREACH']);

/**
 * The pool as a job runner (graphile-worker) is given it. graphile-worker retries a statement
 * whose connection failed with "the database system is starting up" (57P03) or an unreachable
 * host after 3 s, then longer, and a runner's stop waits for that retry: a stop just after the
 * database restarted took 3 to 6 s. Its poll (WORKER_POLL_INTERVAL_MS) tries again anyway, so
 * these errors reach it without the code it retries on (the original as `cause`, which
 * isDatabaseUnavailable still reads as an outage).
 */
export function poolForJobRunner(pool: pg.Pool): pg.Pool {
  const unretried = (err: unknown) =>
    err instanceof Error && SLOW_RETRIED.has((err as { code?: string }).code ?? '') ? new Error(err.message, { cause: err }) : err;
  const connect = (callback?: (err: unknown, client?: pg.PoolClient, done?: (release?: unknown) => void) => void) =>
    callback
      ? pool.connect((err, client, done) => callback(err ? unretried(err) : err, client, done))
      : pool.connect().catch((err: unknown) => {
          throw unretried(err);
        });
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') return connect;
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
