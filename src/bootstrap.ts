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

/** SIGTERM/SIGINT: run `stop` once, then exit. A second signal exits at once. */
export function onShutdownSignal(stop: () => Promise<void>) {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down');
    stop()
      .then(() => process.exit(0))
      .catch((err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
