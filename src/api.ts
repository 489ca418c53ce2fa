// `npm run start:api`: HTTP + WebSocket only, stateless; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, onShutdownSignal, resolveDatabase } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await migrateDatabase(url);
const app = await startApp({ config, databaseUrl: url, worker: false });
onShutdownSignal(() => app.stop());
