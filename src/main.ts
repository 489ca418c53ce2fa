// `npm start`: everything in one process — embedded PostgreSQL when DATABASE_URL is unset,
// migrations, HTTP + WebSocket, and a job runner.
import { migrateDatabase, resolveDatabase, serveUntilSignal } from './bootstrap.ts';
import { config } from './config.ts';
import { log } from './log.ts';

// The service's modules load (seconds, on a busy machine) while the database starts and migrates.
const modules = Promise.all([import('./app.ts'), import('./db/client.ts'), import('./projects/service.ts')]);
modules.catch(() => {}); // awaited in start-up, which reports a failure

const { url, directUrl, embedded } = await resolveDatabase({ allowEmbedded: true, keepUp: true });
await serveUntilSignal(
  async () => {
    await migrateDatabase(directUrl);
    const [{ startApp }, { connectDatabase }, { ensureDefaultProject }] = await modules;
    const db = connectDatabase(url, 2, 2, 0, { directUrl });
    const created = await ensureDefaultProject({ db }, config.DEFAULT_TIER);
    await db.close();
    if (created) {
      log.info({ projectId: created.projectId }, 'created project "default"');
      process.stdout.write(`\nProject "default" created. Its API key (shown once):\n\n  ${created.secret}\n\n`);
    }
    return startApp({ config, databaseUrl: url, directUrl });
  },
  async () => {
    await embedded?.stop();
  },
);
