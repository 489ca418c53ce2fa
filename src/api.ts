// `npm run start:api`: HTTP + WebSocket only, stateless; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, resolveDatabase, serveUntilSignal } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await serveUntilSignal(async () => {
  await migrateDatabase(url);
  return startApp({ config, databaseUrl: url, worker: false });
});
