// The embedded cluster's start and stop tell this process's sessions and this directory's postmaster
// from anyone else's: a stop that ran out of time (its pools still open) still stops the cluster it
// owns, and a postmaster.pid naming another cluster's postgres is not taken for this directory's.
import { chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../src/db/client.ts';
import { freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.ts';

let dir: string;
const clusters: EmbeddedDatabase[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'clusters-'));
  // Reachable by the postgres user when run as root (else the data would be placed under /var/lib).
  await chmod(dir, 0o755);
});
afterAll(async () => {
  await Promise.allSettled(clusters.map((c) => c.stop()));
  await rm(dir, { recursive: true, force: true });
});

const start = async (name: string) => {
  const c = await startEmbeddedPostgres(path.join(dir, name));
  clusters.push(c);
  return c;
};
const pidFile = (c: EmbeddedDatabase) => path.join(c.dataDir, 'postmaster.pid');

describe('embedded clusters', () => {
  it("stops the cluster it owns while this process's own sessions are still open, and leaves it up for another process's", async () => {
    const cluster = await start('own-sessions');
    // Another process's session (any other application_name) keeps the cluster up for it.
    const other = new pg.Client({ connectionString: cluster.url, application_name: 'another process' });
    await other.connect();
    // This process's pools, still open (a stop whose service part ran out of its time).
    const db = connectDatabase(cluster.url, 2);
    await db.pool.query('SELECT 1');
    try {
      await cluster.stop();
      expect(existsSync(pidFile(cluster))).toBe(true);
      expect((await other.query('SELECT 1 AS ok')).rows[0].ok).toBe(1);
    } finally {
      await other.end();
    }
    // Only this process's sessions left: the next owner's stop stops it.
    const again = await start('own-sessions');
    expect(again.owns()).toBe(true);
    await db.pool.query('SELECT 1');
    await again.stop();
    expect(existsSync(pidFile(again))).toBe(false);
    await db.close();
  }, 120_000);

  it("does not take another cluster's postgres, named by a postmaster.pid left behind, for this directory's", async () => {
    const mine = await start('mine');
    const theirs = await start('theirs');
    const marker = new pg.Client({ connectionString: mine.url });
    await marker.connect();
    await marker.query('CREATE TABLE mine_marker (x int)');
    await marker.end();
    await mine.stop();
    expect(existsSync(pidFile(mine))).toBe(false);
    // A pid file as a killed postmaster leaves it, whose pid (and port) another cluster's postgres now has.
    await copyFile(pidFile(theirs), pidFile(mine));
    const theirPid = Number(readFileSync(pidFile(theirs), 'utf8').split('\n')[0]);
    const restarted = await start('mine');
    expect(restarted.port).not.toBe(theirs.port);
    expect(Number(readFileSync(pidFile(restarted), 'utf8').split('\n')[0])).not.toBe(theirPid);
    const check = new pg.Client({ connectionString: restarted.url });
    await check.connect();
    try {
      expect((await check.query(`SELECT to_regclass('mine_marker') IS NOT NULL AS mine`)).rows[0].mine).toBe(true);
    } finally {
      await check.end();
    }
  }, 120_000);

  it('never picks a port the service is about to listen on for a new cluster (a cluster that took the HTTP port made npm start fail)', async () => {
    // 1,000 ports the kernel just handed out, avoided: 100 more picks never return one of them
    // (the kernel hands out recent ones again often enough that, not avoided, one comes back).
    const avoid: number[] = [];
    for (let i = 0; i < 1_000; i++) avoid.push(await freePort());
    const avoided = new Set(avoid);
    for (let i = 0; i < 100; i++) expect(avoided.has(await freePort(avoid))).toBe(false);
  });
});
