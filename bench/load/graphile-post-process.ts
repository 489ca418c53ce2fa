// Baseline for end-to-end delivery: graphile-worker (same settings as the service's runner)
// running a trivial task that POSTs 1 KB to a loopback receiver, on its own database.
import http from 'node:http';
import pg from 'pg';
import { Logger, run, type Runner } from 'graphile-worker';
import { serveLoadProcess } from './protocol.ts';
import { startTimingReceiver } from './receiver.ts';

export interface GraphileInput {
  databaseUrl: string;
  jobs: number;
  concurrency: number;
}
export interface GraphileOutput {
  jobs: number;
  jobsPerSec: number;
  seconds: number;
}

const quiet = new Logger(() => () => {});

serveLoadProcess<GraphileInput, GraphileOutput>(async (input) => {
  const admin = new pg.Client({ connectionString: input.databaseUrl });
  await admin.connect();
  const dbName = `bench_gw_${process.pid}`;
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(input.databaseUrl);
  url.pathname = `/${dbName}`;
  const receiver = await startTimingReceiver();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const pool = new pg.Pool({ connectionString: url.toString(), max: 20 });
  pool.on('error', () => {});
  pool.on('connect', (c) => c.on('error', () => {}));
  let runner: Runner | undefined;
  try {
    const body = JSON.stringify({ data: 'x'.repeat(1000) });
    runner = await run({
      pgPool: pool,
      concurrency: input.concurrency,
      noHandleSignals: true,
      logger: quiet,
      preset: { worker: { pollInterval: 100, localQueue: { size: input.concurrency } } },
      taskList: {
        post: (payload: any) =>
          new Promise<void>((resolve, reject) => {
            const req = http.request(`${receiver.url}/`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-job-id': String(payload.i), 'content-length': body.length } }, (res) => {
              res.resume();
              res.on('end', () => (res.statusCode! < 300 ? resolve() : reject(new Error(String(res.statusCode)))));
            });
            req.on('error', reject);
            req.end(body);
          }),
      },
    });
    const started = performance.now();
    await pool.query(`SELECT graphile_worker.add_jobs(array_agg(('post', json_build_object('i', i), null, null, null, null, null, null)::graphile_worker.job_spec)) FROM generate_series(1, $1) i`, [input.jobs]);
    await receiver.waitFor(input.jobs, 300_000);
    const seconds = (performance.now() - started) / 1000;
    return { jobs: input.jobs, jobsPerSec: input.jobs / seconds, seconds };
  } finally {
    // The runner holds pool clients: stop it first or pool.end() waits forever.
    await runner?.stop().catch(() => {});
    await pool.end().catch(() => {});
    await receiver.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
});
