// What writing the metrics roll-ups costs the delivery engine: the engine-alone drain of
// delivery-e2e, with job runners that differ only in METRICS_ROLLUPS, in alternated rounds.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { median, percent } from '../alternated-rounds.ts';
import { createScenarioDatabase } from '../database.ts';
import type { BacklogInput, BacklogOutput } from '../load/ingest-backlog-process.ts';
import { startTimingReceiver } from '../load/receiver.ts';
import type { Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

const BURST = 5_000;
const ROUNDS = 10;
const ON = 'metrics-rollup-cost: roll-ups on';
const OFF = 'metrics-rollup-cost: roll-ups off';

type Side = 'on' | 'off';

/** One round: a backlog of BURST deliveries (a webhook on the contract's defaults) ingested while no runner runs, then drained by one runner with METRICS_ROLLUPS=side. */
async function round(ctx: ScenarioContext, apiUrl: string, apiKey: string, dbUrl: string, dataDir: string, env: Record<string, string>, side: Side, n: number) {
  const receiver = await startTimingReceiver();
  let worker: ReturnType<typeof startWorker> | undefined;
  try {
    await ctx.runLoadProcess<BacklogOutput>(
      'bench/load/ingest-backlog-process.ts',
      { serviceUrl: apiUrl, apiKey, receiverUrl: receiver.url, events: BURST, connections: ctx.settings.connections } satisfies BacklogInput,
      { timeoutMs: 4 * 60_000 },
    );
    worker = startWorker(dbUrl, path.join(dataDir, `worker-${n}`), { env: { ...env, METRICS_ROLLUPS: side }, label: `job runner, METRICS_ROLLUPS=${side}` });
    await receiver.waitFor(BURST, 180_000);
    const times = [...receiver.firstSeen.values()].sort((a, b) => a - b);
    return (BURST - 1) / ((times[times.length - 1] - times[0]) / 1000);
  } finally {
    await worker?.stop();
    await receiver.close();
  }
}

const metricsRollupCost: Scenario = {
  name: 'metrics-rollup-cost',
  description:
    `What the per-webhook metrics roll-ups cost delivery: the engine-alone drain of delivery-e2e (${BURST.toLocaleString('en')} 1 KB events to a webhook on the contract's defaults, ` +
    `maxInFlight 10, ingested while no job runner runs, ` +
    `then one job runner drains them to a loopback receiver; deliveries/s from the first receipt to the last), with runners identical but for METRICS_ROLLUPS ` +
    `(on: the runner gathers each recorded result into its webhook's 60 s and 3600 s buckets, latency sketch and failure streak, written once a second; off: not). one unmeasured warm-up round, then ${ROUNDS} rounds alternated on/off, off/on, …; medians. ` +
    `cost = 1 − on/off.`,
  timeoutMs: 25 * 60_000,
  async run(ctx) {
    const db = await createScenarioDatabase(ctx.databaseUrl, 'rollup');
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-rollup-'));
    const env = { SECRETS_KEY: randomBytes(32).toString('base64') };
    let api: Awaited<ReturnType<typeof startService>> | undefined;
    try {
      api = await startService(db.url, path.join(dataDir, 'api'), { script: 'src/api.ts', label: 'API only (rollup cost)', env });
      const project = await createBenchProject(db.url);
      // One unmeasured round first: the first runner of a run meets a cold API instance and database.
      const warm = await round(ctx, api.url, project.apiKey, db.url, dataDir, env, 'off', -1);
      ctx.log(`warm-up round (not counted): ${warm.toFixed(0)} deliveries/s`);
      const runs: Record<Side, number[]> = { on: [], off: [] };
      for (let r = 0; r < ROUNDS && !ctx.signal.aborted; r++) {
        const side: Side = r % 4 === 0 || r % 4 === 3 ? 'on' : 'off';
        const perSec = await round(ctx, api.url, project.apiKey, db.url, dataDir, env, side, r);
        runs[side].push(perSec);
        ctx.log(`round ${r + 1}/${ROUNDS}, roll-ups ${side}: ${perSec.toFixed(0)} deliveries/s`);
      }
      const on = median(runs.on);
      const off = median(runs.off);
      return [
        { name: OFF, throughput: off, unit: 'deliveries/s', p50Ms: 0, p99Ms: 0, notes: `rounds: ${runs.off.map((x) => x.toFixed(0)).join(', ')}` },
        {
          name: ON,
          throughput: on,
          unit: 'deliveries/s',
          p50Ms: 0,
          p99Ms: 0,
          baseline: OFF,
          notes: `rounds: ${runs.on.map((x) => x.toFixed(0)).join(', ')}; cost ${percent(1 - on / off)} (budget 5 %)`,
        },
      ];
    } finally {
      await api?.stop();
      await db.dispose().catch((e) => ctx.log(`could not drop the rollup database: ${e.message}`));
    }
  },
};

export default metricsRollupCost;
