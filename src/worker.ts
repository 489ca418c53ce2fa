// `npm run start:worker`: a graphile-worker job runner only; run as many as needed on one DATABASE_URL.
import { startApp } from './app.ts';
import { migrateDatabase, onShutdownSignal, resolveDatabase } from './bootstrap.ts';
import { config } from './config.ts';

const { url } = await resolveDatabase({ allowEmbedded: false });
await migrateDatabase(url);
const app = await startApp({ config, databaseUrl: url, api: false });
onShutdownSignal(() => app.stop());
