// Runs `fn` with a PostgreSQL URL: DATABASE_URL when set, else a throwaway embedded cluster.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';

export async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  if (process.env.DATABASE_URL) return fn(process.env.DATABASE_URL);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pg-scratch-'));
  await chmod(dir, 0o755); // the cluster runs as the postgres user when we are root
  const db = await startEmbeddedPostgres(path.join(dir, 'data'));
  try {
    return await fn(db.url);
  } finally {
    await db.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
