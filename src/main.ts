// `npm start`: everything in one process — embedded PostgreSQL when DATABASE_URL is unset,
// migrations, HTTP + WebSocket, and a job runner.
import { startApp } from './app.ts';
import { migrateDatabase, onShutdownSignal, resolveDatabase } from './bootstrap.ts';
import { config } from './config.ts';
import { log } from './log.ts';
import { ensureDefaultProject } from './projects/service.ts';
import { connectDatabase } from './db/client.ts';

const { url, embedded } = await resolveDatabase({ allowEmbedded: true });
try {
  await migrateDatabase(url);
  const db = connectDatabase(url, 2);
  const created = await ensureDefaultProject({ db }, config.DEFAULT_TIER);
  await db.close();
  if (created) {
    log.info({ projectId: created.projectId }, 'created project "default"');
    process.stdout.write(`\nProject "default" created. Its API key (shown once):\n\n  ${created.secret}\n\n`);
  }
  // Signals are handled from before the app starts: the HTTP server answers (and may be told to
  // stop) while the job runner is still starting.
  const starting = startApp({ config, databaseUrl: url });
  onShutdownSignal(async () => {
    await (await starting.catch(() => undefined))?.stop();
    await embedded?.stop();
  });
  await starting;
} catch (err) {
  log.fatal({ err }, 'start-up failed');
  await embedded?.stop();
  process.exit(1);
}
