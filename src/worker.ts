// `npm run start:worker`: a graphile-worker job runner only; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, resolveDatabase, serveUntilSignal } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await serveUntilSignal(async () => {
  await migrateDatabase(url);
  return startApp({ config, databaseUrl: url, api: false });
});
