// `npm run start:api`: HTTP (REST, GraphQL, WebSocket, ingest) and SMTP, no job runner; stateless, run as many as needed on one DATABASE_URL
// (which may be a transaction pooler, with DATABASE_DIRECT_URL the server behind it).
import { startApp } from './app.ts';
import { migrateDatabase, resolveDatabase, serveUntilSignal } from './bootstrap.ts';
import { config } from './config.ts';

const { url, directUrl } = await resolveDatabase({ allowEmbedded: false });
await serveUntilSignal(async () => {
  await migrateDatabase(directUrl);
  return startApp({ config, databaseUrl: url, directUrl, worker: false });
});
