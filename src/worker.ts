// `npm run start:worker`: a graphile-worker job runner only; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, resolveDatabase, serveUntilSignal } from './bootstrap.ts';
import { config } from './config.ts';

// A runner works on the server itself (DATABASE_DIRECT_URL when DATABASE_URL is a pooler): it LISTENs,
// holds session locks, and graphile-worker prepares its statements.
const { directUrl } = await resolveDatabase({ allowEmbedded: false });
await serveUntilSignal(async () => {
  await migrateDatabase(directUrl);
  return startApp({ config, databaseUrl: directUrl, api: false });
});
