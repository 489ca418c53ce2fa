import path from 'node:path';
import { config } from './config.ts';
import { EmbeddedDatabaseError, startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { ATTEMPT_TASK } from './deliveries/job.ts';
import { isDatabaseUnavailable } from './errors.ts';
import { log } from './log.ts';
import { noteStopSignal, stopSignalledAt } from './stop-signal.ts';

/**
 * DATABASE_URL, or the embedded PostgreSQL under DATA_DIR/pg: the cluster already running there
 * (another process of this project started it), or one started here. With `keepUp`, a cluster
 * that dies is started again; when that fails the process exits 1 (a supervisor restarts it)
 * rather than answering 503 forever. A directory that cannot be used is one line and exit 1.
 * `directUrl`: the server itself (DATABASE_DIRECT_URL, when DATABASE_URL is a transaction pooler), for
 * migrations, LISTEN, session locks and job runners; `url` otherwise.
 */
export async function resolveDatabase(opts: { allowEmbedded: boolean; keepUp?: boolean }): Promise<{ url: string; directUrl: string; embedded?: EmbeddedDatabase }> {
  if (config.DATABASE_URL) return { url: config.DATABASE_URL, directUrl: config.DATABASE_DIRECT_URL || config.DATABASE_URL };
  if (config.DATABASE_DIRECT_URL) {
    log.fatal('DATABASE_DIRECT_URL is set without DATABASE_URL (the URL, through a pooler or not, that the service uses)');
    process.exit(1);
  }
  if (!opts.allowEmbedded) {
    log.fatal('DATABASE_URL is required for this process (split processes share one PostgreSQL)');
    process.exit(1);
  }
  const started = Date.now();
  const dir = path.join(config.dataDir, 'pg');
  // Whatever goes wrong here is one line and exit 1, never a stack trace: the operator can act on it.
  const fail = (err: unknown): never => {
    const message = err instanceof EmbeddedDatabaseError ? err.message : `the embedded PostgreSQL in ${dir} could not be used: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
    process.stderr.write(`error: ${message}\n`);
    process.exit(1);
  };
  let embedded: EmbeddedDatabase;
  try {
    embedded = await startEmbeddedPostgres(dir, {
      onLog: (m) => log.debug({ postgres: m.trim() }),
      avoidPorts: [config.PORT, config.SMTP_PORT, config.METRICS_PORT ?? 0].filter((p) => p > 0),
      watch: opts.keepUp
        ? {
            onRestart: () =>
              stopSignalledAt()
                ? // Ctrl-C reaches the whole process group, the cluster too: not a failure. Started again, the stop records what it finishes.
                  log.info({ dir }, 'the embedded PostgreSQL stopped with the signal and was started again for the stop to finish')
                : log.warn({ dir }, 'the embedded PostgreSQL stopped unexpectedly and was started again'),
            onLost: (err) => {
              log.fatal({ err: err.message }, 'the embedded PostgreSQL stopped and could not be started again; exiting');
              process.stderr.write(`error: ${err.message}\n`);
              process.exit(1);
            },
          }
        : undefined,
    });
  } catch (err) {
    return fail(err);
  }
  const url = embedded.url.replace(/\/postgres$/, '/app');
  try {
    const admin = new (await import('pg')).default.Client({ connectionString: embedded.url });
    await admin.connect();
    // Two processes starting on a new directory at once: the second CREATE finds the first's database.
    await admin.query('CREATE DATABASE app').catch((e: { code?: string }) => {
      if (e.code !== '42P04' && e.code !== '23505') throw e;
    });
    await admin.end();
  } catch (err) {
    return fail(err);
  }
  // One line that says where the data and the binaries are (both may have moved, as root).
  const moved = embedded.dataDir !== embedded.askedDir;
  const what = embedded.owns() ? 'embedded PostgreSQL started' : 'embedded PostgreSQL already running: sharing it';
  log[moved ? 'warn' : 'info'](
    { dir: embedded.dataDir, asked: embedded.askedDir, binaries: embedded.binDir, port: embedded.port, owner: embedded.owns(), ms: Date.now() - started },
    `${what}: data in ${embedded.dataDir}${moved ? ` (the postgres user cannot reach ${embedded.askedDir})` : ''}, binaries in ${embedded.binDir}`,
  );
  return { url, directUrl: url, embedded };
}

/** Migrates, first waiting for a database that cannot be reached yet (restarting, or starting beside this process). */
export async function migrateDatabase(url: string) {
  const started = Date.now();
  let applied: string[];
  for (let delay = 200; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      applied = await migrate(url, [ATTEMPT_TASK]);
      break;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      log.warn({ err: (err as Error).message }, 'the database cannot be reached yet; trying again');
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  log.info({ applied, ms: Date.now() - started }, 'migrations up to date');
}

/** A signal repeated this soon is the same stop, relayed (npm passes on what the process group already got). */
const REPEAT_WINDOW_MS = 2_000;
/** After a signal, the service's stop gets SHUTDOWN_TIMEOUT_MS (in-flight requests) and this much more (jobs, pools). */
const STOP_MARGIN_MS = 1_500;
/** Then the clean-up (the embedded cluster's fast shutdown) gets this much before the process exits regardless. */
const CLEANUP_BUDGET_MS = 2_000;

/** A started service: its stop, and what a stop under way is waiting for (logged should it run out of time). */
interface Served {
  stop(): Promise<void>;
  readonly stopStep?: string;
}

/**
 * Runs `start` with SIGTERM/SIGINT handled from its beginning (the HTTP server answers, and may be
 * told to stop, while the rest starts), and owns the process's exit: a start-up that fails exits 1,
 * even when a signal came first; a signal exits 0 once the started service has stopped. `cleanup`
 * (the embedded cluster) runs once before either exit. A second signal (not a relayed copy of the
 * first) exits 1 at once. A stop is bounded: SHUTDOWN_TIMEOUT_MS + 3.5 s after the signal (7.5 s
 * by default) the process exits 1 with whatever is left unfinished, as a process manager's
 * SIGKILL would end it a little later anyway.
 */
export async function serveUntilSignal(start: () => Promise<Served>, cleanup: () => Promise<void> = async () => {}) {
  // The process ends through `exit` only: not on its own while a start-up awaits something that
  // holds no handle, nor before a signal sent to itself has been handled.
  setInterval(() => {}, 1 << 30);
  let cleaned: Promise<void> | undefined;
  const exit = async (code: number) => {
    cleaned ??= cleanup();
    await cleaned.catch((err) => {
      log.error({ err }, 'clean-up failed');
      code = 1;
    });
    if (stopSignalledAt()) log.info({ code, ms: Date.now() - stopSignalledAt() }, 'stopped');
    process.exit(code);
  };
  let starting!: Promise<Served>;
  let started: Served | undefined;
  const handler = (signal: string) => {
    if (stopSignalledAt()) {
      if (Date.now() - stopSignalledAt() < REPEAT_WINDOW_MS) return;
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    noteStopSignal();
    log.info({ signal }, 'shutting down');
    const serviceBudget = config.SHUTDOWN_TIMEOUT_MS + STOP_MARGIN_MS;
    setTimeout(() => {
      log.warn({ ms: serviceBudget, waitingFor: started?.stopStep }, 'the service did not stop in time; stopping the database and exiting');
      void exit(1);
    }, serviceBudget).unref();
    setTimeout(() => {
      log.error({ ms: serviceBudget + CLEANUP_BUDGET_MS }, 'shutdown did not finish in time; exiting');
      process.exit(1);
    }, serviceBudget + CLEANUP_BUDGET_MS).unref();
    // A start-up that fails is not a clean stop: the start-up path below exits, with 1.
    starting.then(
      (app) =>
        (started = app).stop().then(
          () => exit(0),
          (err) => {
            log.error({ err }, 'shutdown failed');
            return exit(1);
          },
        ),
      () => {},
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  // A library call left unawaited (graphile-worker releasing a job on its own connection) fails
  // while the database is away: that is the outage, already answered 503 and retried, not a
  // reason to end the process. Anything else still ends it, as Node would.
  process.on('unhandledRejection', (reason) => {
    if (isDatabaseUnavailable(reason)) {
      log.warn({ err: reason instanceof Error ? reason.message : String(reason) }, 'a database call failed while the database is unavailable');
      return;
    }
    log.fatal({ err: reason }, 'unhandled rejection');
    process.stderr.write(`error: unhandled rejection: ${reason instanceof Error ? reason.message : String(reason)}\n`);
    void exit(1);
  });
  starting = (async () => start())();
  try {
    await starting;
  } catch (err) {
    log.fatal({ err }, 'start-up failed');
    process.stderr.write(`error: start-up failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
    await exit(1);
  }
}
