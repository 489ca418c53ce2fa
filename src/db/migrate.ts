import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Logger, runMigrations as runWorkerMigrations } from 'graphile-worker';

const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../prisma/migrations');
const LOCK_KEY = 727_001; // advisory lock id shared by every process that migrates

// The same table `prisma migrate deploy` keeps, so either tool sees what the other applied.
const LEDGER = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id" VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum" VARCHAR(64) NOT NULL,
  "finished_at" TIMESTAMPTZ,
  "migration_name" VARCHAR(255) NOT NULL,
  "logs" TEXT,
  "rolled_back_at" TIMESTAMPTZ,
  "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

export async function listMigrations(): Promise<{ name: string; sql: string }[]> {
  const entries = await readdir(MIGRATIONS_DIR, { withFileTypes: true });
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(names.map(async (name) => ({ name, sql: await readFile(path.join(MIGRATIONS_DIR, name, 'migration.sql'), 'utf8') })));
}

/**
 * Applies pending migrations (the app's, then graphile-worker's) under an advisory
 * lock, so processes starting together against one database are safe.
 * `directTasks`: tasks whose jobs the app writes into graphile-worker's table itself (ingest's
 * attempt jobs), which need their task row to exist. Returns the names applied now.
 */
export async function migrate(url: string, directTasks: readonly string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    await client.query(LEDGER);
    const done = new Set(
      (await client.query(`SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`)).rows.map((r) => r.migration_name),
    );
    for (const m of await listMigrations()) {
      if (done.has(m.name)) continue;
      const checksum = createHash('sha256').update(m.sql).digest('hex');
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count) VALUES ($1, $2, now(), $3, 1)`,
          [randomUUID(), checksum, m.name],
        );
        await client.query('COMMIT');
        applied.push(m.name);
      } catch (e) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${m.name} failed: ${(e as Error).message}`);
      }
    }
    await runWorkerMigrations({ connectionString: url, logger: quietLogger });
    // The job queue shrinks after every burst: without this, VACUUM truncates its empty pages
    // under an ACCESS EXCLUSIVE lock that ingest (which writes jobs) and the runners wait behind
    // (see the migration hot_tables_keep_their_pages). Set once; checked first, so a process
    // that starts takes no lock on the queue when it is set already.
    await client.query(`DO $$
      DECLARE t regclass;
      BEGIN
        FOREACH t IN ARRAY ARRAY['graphile_worker._private_jobs', 'graphile_worker._private_job_queues']::regclass[] LOOP
          IF NOT coalesce((SELECT 'vacuum_truncate=false' = ANY (reloptions) FROM pg_class WHERE oid = t), false) THEN
            EXECUTE format('ALTER TABLE %s SET (vacuum_truncate = false)', t);
          END IF;
        END LOOP;
      END $$`);
    // Job rows written directly need their task's row, which graphile-worker otherwise creates
    // only when a job is first added through it.
    await client.query(
      `INSERT INTO graphile_worker._private_tasks (identifier) SELECT t FROM unnest($1::text[]) t
        WHERE NOT EXISTS (SELECT 1 FROM graphile_worker._private_tasks WHERE identifier = t)`,
      [directTasks],
    );
    await analyzeNeverAnalyzed(client);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    await client.end();
  }
  return applied;
}

/**
 * Gives planner statistics to the tables that never had any (a fresh database, the partitions a
 * migration made). Without them PostgreSQL plans as if each were a few pages of unknown rows, and
 * the delivery statements' plans scan partitions instead of using their primary keys until
 * autovacuum first analyzes them (after its naptime, a minute by default): on a fresh database at
 * 200 events/s that doubled PostgreSQL's time per event. Analyzed empty, the estimates grow with
 * the tables. Nothing to do once every table has statistics: then this is one catalog read.
 */
export async function analyzeNeverAnalyzed(client: pg.Client | pg.Pool | pg.PoolClient, tables?: string[]): Promise<void> {
  const { rows } = await client.query<{ t: string }>(
    `SELECT c.oid::regclass::text AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname IN ('public', 'graphile_worker') AND c.relkind = 'r' AND c.reltuples < 0
        AND ($1::text[] IS NULL OR c.oid::regclass::text = ANY ($1::text[]))
      ORDER BY 1`,
    [tables ?? null],
  );
  if (rows.length) await client.query(`ANALYZE ${rows.map((r) => r.t).join(', ')}`);
}

export const quietLogger = new Logger(() => () => {});

/**
 * graphile-worker's own warnings and errors (a task that threw, a lost connection) in our logs.
 * Once the process is stopping (`stopping`), they are told at info: Ctrl-C on `npm start` reaches
 * its embedded PostgreSQL too, which ends the runner's connections under it (UNLISTEN failed, a
 * connection terminated by the administrator), and that is the stop, not a fault.
 */
export function workerLogger(log: { info: (o: object, m: string) => void; warn: (o: object, m: string) => void; error: (o: object, m: string) => void }, stopping: () => boolean = () => false) {
  return new Logger((scope) => (level, message, meta) => {
    if (level !== 'error' && level !== 'warning') return;
    if (stopping()) log.info({ scope, ...meta, workerLevel: level }, `${message} (while stopping)`);
    else if (level === 'error') log.error({ scope, ...meta }, message);
    else log.warn({ scope, ...meta }, message);
  });
}
