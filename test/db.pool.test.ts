import net from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { poolForJobRunner } from '../src/db/client.ts';
import { isDatabaseUnavailable } from '../src/errors.ts';
import { evaluateAlerts } from '../src/alerts/evaluate.ts';
import { runRetention } from '../src/retention/run.ts';
import { startTestApp, type TestApp } from './support/app.ts';

const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.stop()));
});

describe('connection pools', () => {
  it('open the connections DATABASE_POOL_MIN asks for before the service answers, and keep them', async () => {
    const app = await startTestApp({ worker: true, config: { DATABASE_POOL_MIN: 3 } });
    apps.push(app);
    // Open already, idle: a burst later takes them instead of making PostgreSQL start backends.
    expect(app.rt.db.pool.totalCount).toBe(3);
    expect(app.rt.db.relaxedPool.totalCount).toBeGreaterThanOrEqual(3);
    const res = await fetch(`${app.url}/readyz`);
    expect(res.status).toBe(200);
    expect(app.rt.db.pool.totalCount).toBe(3);
  });

  it('open none ahead with DATABASE_POOL_MIN=0', async () => {
    const app = await startTestApp({ config: { DATABASE_POOL_MIN: 0 } });
    apps.push(app);
    expect(app.rt.db.pool.totalCount).toBeLessThanOrEqual(1);
  });

  it("plan the service's own statements generically, on the pool and the relaxed pool; Prisma's connections keep PostgreSQL's default", async () => {
    const app = await startTestApp({ worker: true });
    apps.push(app);
    const mode = async (p: pg.Pool) => (await p.query('SHOW plan_cache_mode')).rows[0].plan_cache_mode as string;
    expect(await mode(app.rt.db.pool)).toBe('force_generic_plan');
    expect(await mode(app.rt.db.relaxedPool)).toBe('force_generic_plan');
    expect(await app.rt.db.prisma.$queryRawUnsafe(`SELECT current_setting('plan_cache_mode') AS mode`)).toEqual([{ mode: 'auto' }]);
  });

  it('never lend the session-lock connections from the pool: two lock-holding jobs at once finish on a pool of 2', async () => {
    // The alerts evaluation and a retention pass each hold a connection for their advisory lock
    // and run their statements on the pool. Were the lock connections the pool's, the two would
    // hold both of a pool of 2 and each wait for a third: neither would ever finish.
    const app = await startTestApp({ config: { DATABASE_POOL_SIZE: 2, DATABASE_POOL_MIN: 0 } });
    apps.push(app);
    const both = Promise.all([evaluateAlerts(app.rt), runRetention(app.rt)]);
    const stuck = new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 20_000).unref());
    const outcome = await Promise.race([both, stuck]);
    expect(outcome).not.toBe('stuck');
    const [alerts, retention] = outcome as Awaited<typeof both>;
    expect(alerts.ran).toBe(true);
    expect(retention.ran).toBe(true);
    expect(app.rt.db.direct).not.toBe(app.rt.db.pool);
  }, 30_000);
});

/** A server on loopback that answers every connection's start-up as PostgreSQL does while it starts: FATAL 57P03. */
async function startingUpServer() {
  const server = net.createServer((socket) => {
    socket.once('data', () => {
      const fields = Buffer.concat([Buffer.from('SFATAL\0'), Buffer.from('C57P03\0'), Buffer.from('Mthe database system is starting up\0'), Buffer.from([0])]);
      const head = Buffer.alloc(5);
      head.write('E', 0);
      head.writeInt32BE(fields.length + 4, 1);
      socket.end(Buffer.concat([head, fields]));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((r) => server.close(r)) };
}

describe("the job runner's pool", () => {
  it('gives a connection refused while the database starts up without the code graphile-worker would retry after 3 s and more (its stop waited for it), still read as an outage', async () => {
    const server = await startingUpServer();
    const pool = new pg.Pool({ host: '127.0.0.1', port: server.port, user: 'x', password: 'x', database: 'x', max: 1 });
    pool.on('error', () => {});
    try {
      type Refused = Error & { code?: string; cause?: { code?: string } };
      const refused = (connecting: Promise<unknown>) => connecting.then(() => null, (e: unknown) => e as Refused);
      const plain = (await refused(pool.connect()))!;
      expect(plain.code).toBe('57P03');
      const runner = poolForJobRunner(pool);
      const viaPromise = (await refused(runner.connect()))!;
      const viaCallback = await new Promise<Refused>((r) => runner.connect((err) => r(err as Refused)));
      for (const err of [viaPromise, viaCallback]) {
        expect(err.code).toBeUndefined();
        expect(err.message).toBe('the database system is starting up');
        expect(err.cause?.code).toBe('57P03');
        expect(isDatabaseUnavailable(err)).toBe(true);
      }
      // Everything else is the pool's own.
      expect(runner.options.max).toBe(1);
      expect(runner.totalCount).toBe(pool.totalCount);
    } finally {
      await pool.end();
      await server.close();
    }
  });
});
