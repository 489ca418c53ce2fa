// What the ingest quota checks cost: the same HTTP ingest on two service instances that differ
// only in QUOTA_ENFORCEMENT, loaded in turn so the machine's other load hits both alike.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KILOBYTE_EVENT } from '../baselines/index.ts';
import type { LoadFigures, Scenario, ScenarioContext } from '../scenario.ts';
import { managementCall, median, percent, runSettings, summary } from '../alternated-rounds.ts';
import { startService, type RunningService } from '../service.ts';

/**
 * Rounds of one load run per instance; the order alternates (on/off, off/on, …) so a drift of the
 * machine's load cancels out. On a shared 2-core machine one run's throughput swings by ±15 %, so
 * many short paired runs say more than a few long ones.
 */
const ROUNDS = 8;

const ON = 'ingest-quota-cost: quotas on';
const OFF = 'ingest-quota-cost: quotas off';

type Side = 'on' | 'off';





const ingestQuotaCost: Scenario = {
  name: 'ingest-quota-cost',
  description:
    `What the quota checks cost on the ingest path: POST /i/{publicId} (as ingest-http) on two instances of the service started for this scenario, ` +
    `identical but for QUOTA_ENFORCEMENT (on: the checks inside the statement that stores the event, counting the rate window and reading the usage counters; ` +
    `off: no check). Enterprise project with lifted custom quotas, so the checks run without the per-project lock of small limits and never refuse. ` +
    `${ROUNDS} short runs per instance (40 % of the run's duration each, after one unmeasured warm-up run per instance), alternated on/off, off/on, …; medians. "quotas on" is compared with "quotas off": ` +
    `cost = 1 − on/off of the medians; the notes also give each round's cost and their median.`,
  timeoutMs: (s) => 180_000 + 2 * (ROUNDS * (runSettings(s).warmup + runSettings(s).duration) + 3) * 1000,
  async run(ctx: ScenarioContext) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-quota-cost-'));
    // Both instances decrypt the same ingest secret, so they share a secrets key.
    const env = { SECRETS_KEY: randomBytes(32).toString('base64') };
    const services: Partial<Record<Side, RunningService>> = {};
    let webhookId: string | undefined;
    try {
      for (const side of ['on', 'off'] as const) {
        services[side] = await startService(ctx.databaseUrl, path.join(dataDir, side), {
          label: `service with QUOTA_ENFORCEMENT=${side}`,
          env: { ...env, QUOTA_ENFORCEMENT: side },
        });
        ctx.log(`QUOTA_ENFORCEMENT=${side}: ${services[side]!.url} (pid ${services[side]!.pid})`);
      }
      const on = services.on!;
      // Deliveries a day ahead: the job runners stay idle while ingest is measured.
      const created = await managementCall(on.url, ctx.apiKey, 'POST', '/v1/webhooks', { name: 'bench quota cost', url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 });
      if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
      webhookId = created.body.id;
      const { publicId, ingestSecret } = created.body;
      const request = { method: 'POST' as const, path: `/i/${publicId}`, headers: { 'content-type': 'application/json', 'x-webhook-secret': ingestSecret }, body: KILOBYTE_EVENT };
      for (const side of ['on', 'off'] as const) {
        const probe = await fetch(`${services[side]!.url}${request.path}`, { ...request, signal: AbortSignal.timeout(10_000) });
        const answer: any = await probe.json();
        if (probe.status !== 202 || !answer?.eventId) throw new Error(`ingest (quotas ${side}) answered ${probe.status} ${JSON.stringify(answer)}`);
      }

      // JIT, pools and prepared statements warm on both instances before anything counts.
      for (const side of ['on', 'off'] as const) await ctx.autocannon({ ...request, duration: 2, warmup: Math.min(ctx.settings.warmup, 1), url: services[side]!.url });
      const runs: Record<Side, LoadFigures[]> = { on: [], off: [] };
      for (let round = 0; round < ROUNDS && !ctx.signal.aborted; round++) {
        const order: Side[] = round % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
        for (const side of order) {
          const figures = await ctx.autocannon({ ...request, ...runSettings(ctx.settings), url: services[side]!.url });
          runs[side].push(figures);
          ctx.log(`round ${round + 1}/${ROUNDS}, quotas ${side}: ${Math.round(figures.throughput)} req/s, p50 ${figures.p50Ms} ms, p99 ${figures.p99Ms} ms`);
        }
      }
      if (runs.on.length < ROUNDS || runs.off.length < ROUNDS) throw new Error('interrupted before every round ran');

      const off = summary(OFF, runs.off);
      const onResult = summary(ON, runs.on);
      const cost = 1 - onResult.throughput / off.throughput;
      const perRound = runs.on.map((r, i) => 1 - r.throughput / runs.off[i].throughput);
      const list = (rs: LoadFigures[]) => rs.map((r) => Math.round(r.throughput)).join(', ');
      off.notes = `median of ${ROUNDS} runs (${list(runs.off)} req/s)`;
      onResult.notes =
        `median of ${ROUNDS} runs (${list(runs.on)} req/s); cost = 1 − on/off = ${percent(cost)} ` +
        `(per round: ${perRound.map(percent).join(', ')}; their median ${percent(median(perRound))})`;
      onResult.baseline = OFF;
      ctx.log(`cost of the quota checks: ${percent(cost)} of ingest throughput (median of the rounds' costs: ${percent(median(perRound))})`);
      return [off, onResult];
    } finally {
      // Leaves the service idle: destroy removes the events, deliveries and queued jobs.
      if (webhookId && services.on) {
        await managementCall(services.on.url, ctx.apiKey, 'POST', `/v1/webhooks/${webhookId}/archive`).catch((e) => ctx.log(`archive: ${e.message}`));
        await managementCall(services.on.url, ctx.apiKey, 'POST', `/v1/webhooks/${webhookId}/destroy`, undefined, 60_000).catch((e) => ctx.log(`destroy: ${e.message}`));
      }
      await Promise.allSettled(Object.values(services).map((s) => s.stop()));
      await rm(dataDir, { recursive: true, force: true });
    }
  },
};

export default ingestQuotaCost;
