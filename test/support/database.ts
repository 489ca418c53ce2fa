import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** The databases this test file made: drop-databases.ts drops them after the file. */
const made: string[] = [];

/** A fresh, migrated database for one test file (a copy of the run's template). */
export async function createTestDatabase(): Promise<string> {
  const server = inject('pgServerUrl');
  const template = inject('pgTemplate');
  const name = `test_${randomBytes(6).toString('hex')}`;
  made.push(name);
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

/**
 * Drops every database this test file made, once its own afterAll hooks have run. A run makes
 * about 150 of them (12–45 MB each, and as much WAL again to copy each one): kept to the end of
 * the run they filled a CI machine's disk.
 */
export async function dropTestDatabases(): Promise<void> {
  const names = made.splice(0);
  if (!names.length) return;
  const admin = new pg.Client({ connectionString: inject('pgServerUrl') });
  await admin.connect();
  try {
    for (const name of names) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}
