// `npm run start:api`: HTTP + WebSocket only, stateless; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, onShutdownSignal, resolveDatabase } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await migrateDatabase(url);
// Signals are handled from before the app starts (its HTTP server answers while the rest starts).
const starting = startApp({ config, databaseUrl: url, worker: false });
onShutdownSignal(async () => (await starting.catch(() => undefined))?.stop());
await starting;
