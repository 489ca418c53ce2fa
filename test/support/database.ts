import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A fresh, migrated database for one test file (a copy of the run's template). */
export async function createTestDatabase(): Promise<string> {
  const server = inject('pgServerUrl');
  const template = inject('pgTemplate');
  const name = `test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    // CREATE DATABASE ... TEMPLATE fails while another session is connected to the template.
    for (let i = 0; ; i++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (e: any) {
        if (i >= 20 || !/being accessed by other users/.test(e.message)) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await admin.end();
  }
  return withDatabase(server, name);
}

export function serverUrl(): string {
  return inject('pgServerUrl');
}
