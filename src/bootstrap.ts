import path from 'node:path';
import { config } from './config.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { log } from './log.ts';

/** DATABASE_URL, or an embedded PostgreSQL under DATA_DIR/pg (created and started here). */
export async function resolveDatabase(opts: { allowEmbedded: boolean }): Promise<{ url: string; embedded?: EmbeddedDatabase }> {
  if (config.DATABASE_URL) return { url: config.DATABASE_URL };
  if (!opts.allowEmbedded) {
    log.fatal('DATABASE_URL is required for this process (split processes share one PostgreSQL)');
    process.exit(1);
  }
  const started = Date.now();
  const embedded = await startEmbeddedPostgres(path.join(config.dataDir, 'pg'), {
    onLog: (m) => log.debug({ postgres: m.trim() }),
  });
  const url = embedded.url.replace(/\/postgres$/, '/app');
  const admin = new (await import('pg')).default.Client({ connectionString: embedded.url });
  await admin.connect();
  const exists = await admin.query(`SELECT 1 FROM pg_database WHERE datname = 'app'`);
  if (exists.rowCount === 0) await admin.query('CREATE DATABASE app');
  await admin.end();
  log.info({ dir: path.join(config.dataDir, 'pg'), port: embedded.port, ms: Date.now() - started }, 'embedded PostgreSQL started');
  return { url, embedded };
}

export async function migrateDatabase(url: string) {
  const started = Date.now();
  const applied = await migrate(url);
  log.info({ applied, ms: Date.now() - started }, 'migrations up to date');
}

/**
 * Runs `start` with SIGTERM/SIGINT handled from its beginning (the HTTP server answers, and may be
 * told to stop, while the rest starts), and owns the process's exit: a start-up that fails exits 1,
 * even when a signal came first; a signal exits 0 once the started service has stopped. `cleanup`
 * (the embedded cluster) runs once before either exit. A second signal exits 1 at once.
 */
export async function serveUntilSignal(start: () => Promise<{ stop(): Promise<void> }>, cleanup: () => Promise<void> = async () => {}) {
  let cleaned: Promise<void> | undefined;
  const exit = async (code: number) => {
    cleaned ??= cleanup();
    await cleaned.catch((err) => {
      log.error({ err }, 'clean-up failed');
      code = 1;
    });
    process.exit(code);
  };
  let starting!: Promise<{ stop(): Promise<void> }>;
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down');
    // A start-up that fails is not a clean stop: the start-up path below exits, with 1.
    starting.then(
      (app) =>
        app.stop().then(
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
  starting = (async () => start())();
  try {
    await starting;
  } catch (err) {
    log.fatal({ err }, 'start-up failed');
    await exit(1);
  }
}
