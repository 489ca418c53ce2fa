// `npm run start:worker`: a graphile-worker job runner only; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, onShutdownSignal, resolveDatabase } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await migrateDatabase(url);
// Signals are handled from before the app starts (its HTTP server answers while the rest starts).
const starting = startApp({ config, databaseUrl: url, api: false });
onShutdownSignal(async () => (await starting.catch(() => undefined))?.stop());
await starting;
