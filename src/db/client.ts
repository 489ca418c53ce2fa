import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.ts';
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
  url: string;
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
 * `relaxedPoolSize`: the relaxed pool also carries a job runner's own bookkeeping, so a process
 * that runs one sizes it to the runner's concurrency (graphile-worker warns below that).
 */
export function connectDatabase(url: string, poolSize = 20, relaxedPoolSize = poolSize, keepOpen = 0): Database {
  // Timestamps are stored as UTC wall time (Prisma's `timestamp(3)`); every session speaks UTC.
  // `min`: the connections a pool keeps open however long they idle (opened by `warm`).
  const pool = new pg.Pool({ connectionString: url, max: poolSize, min: Math.min(keepOpen, poolSize), idleTimeoutMillis: IDLE_TIMEOUT_MS, options: '-c TimeZone=UTC' });
  // Connection errors surface on the next query; these handlers keep them from crashing the process.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const relaxedPool = new pg.Pool({
    connectionString: url,
    max: relaxedPoolSize,
    min: Math.min(keepOpen, relaxedPoolSize),
    idleTimeoutMillis: IDLE_TIMEOUT_MS,
    options: '-c TimeZone=UTC -c synchronous_commit=off',
  });
  relaxedPool.on('error', () => {});
  relaxedPool.on('connect', (client) => client.on('error', () => {}));
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: poolSize, idleTimeoutMillis: IDLE_TIMEOUT_MS, options: '-c TimeZone=UTC' }) });
  return {
    prisma,
    pool,
    relaxedPool,
    url,
    async warm() {
      const open = async (p: pg.Pool, n: number) => {
        const clients = await Promise.all(Array.from({ length: n }, () => p.connect().catch(() => null)));
        for (const c of clients) c?.release();
      };
      await Promise.all([open(pool, Math.min(keepOpen, poolSize)), open(relaxedPool, Math.min(keepOpen, relaxedPoolSize))]);
    },
    async close() {
      await Promise.allSettled([prisma.$disconnect(), pool.end(), relaxedPool.end()]);
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
