// What idempotency keys cost on the ingest path (CONTRACT §12, issue 32): the same HTTP ingest on
// one service and one webhook, without a key and with a new Idempotency-Key on every request (each
// one claimed in ingest_idempotency_keys by the ingest statement), loaded in turn in the same run.
// Target: keyed ≥ 0.85× keyless.
import { KILOBYTE_EVENT } from '../baselines/index.ts';
import type { LoadFigures, Scenario } from '../scenario.ts';
import { alternateRounds, managementCall, median, percent, runSettings, summary } from '../alternated-rounds.ts';

/** Rounds of one run per webhook, alternated (plain/stripe, stripe/plain, …) so the shared machine's drift cancels out. */
const ROUNDS = 6;
const PLAIN = 'ingest-idempotency-cost: no key';
const KEYED = 'ingest-idempotency-cost: a new key each';
type Side = 'plain' | 'keyed';

const ingestIdempotencyCost: Scenario = {
  name: 'ingest-idempotency-cost',
  description:
    'What idempotency keys cost on the ingest path: POST /i/{publicId} with a ~1 KB JSON body (as ingest-http) shown the ingest secret, without a key, ' +
    'and with an Idempotency-Key unique to each request (autocannon idReplacement), which the ingest statement claims in ingest_idempotency_keys beside the event ' +
    `(the body's sha256 as its fingerprint; the delivery carries the key). Same service, same webhook, same run; ${ROUNDS} short runs per side, alternated; medians. ` +
    'ratio = keyed/keyless of the median throughputs (target ≥ 0.85).',
  timeoutMs: (s) => 120_000 + 2 * (ROUNDS * (runSettings(s).warmup + runSettings(s).duration) + 3) * 1000,
  async run(ctx) {
    const ids: string[] = [];
    try {
      // Deliveries a day ahead: the job runner stays idle while ingest is measured.
      const make = async (name: string) => {
        const created = await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', '/v1/webhooks', { name, url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 });
        if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
        ids.push(created.body.id);
        return created.body as { id: string; publicId: string; ingestSecret: string };
      };
      const hook = await make('bench idempotency cost');
      const headers = { 'content-type': 'application/json', 'x-webhook-secret': hook.ingestSecret };
      // `[<id>]` becomes a new id in every request: every keyed request is a first, never a duplicate.
      const requests: Record<Side, { method: 'POST'; path: string; headers: Record<string, string>; body: string; idReplacement?: boolean }> = {
        plain: { method: 'POST', path: `/i/${hook.publicId}`, headers, body: KILOBYTE_EVENT },
        keyed: { method: 'POST', path: `/i/${hook.publicId}`, headers: { ...headers, 'idempotency-key': 'bench-[<id>]' }, body: KILOBYTE_EVENT, idReplacement: true },
      };
      for (const side of ['plain', 'keyed'] as const) {
        const probe = await fetch(`${ctx.serviceUrl}${requests[side].path}`, { ...requests[side], headers: { ...requests[side].headers, ...(side === 'keyed' ? { 'idempotency-key': 'bench-probe' } : {}) }, signal: AbortSignal.timeout(10_000) });
        const answer: any = await probe.json();
        if (probe.status !== 202 || answer?.status !== 'scheduled') throw new Error(`ingest (${side}) answered ${probe.status} ${JSON.stringify(answer)}`);
        await ctx.autocannon({ ...requests[side], duration: 2, warmup: Math.min(ctx.settings.warmup, 1) });
      }
      const runs = await alternateRounds<Side>(ctx, requests, ['plain', 'keyed'], ROUNDS);
      const base = summary(PLAIN, runs.plain);
      const keyed = summary(KEYED, runs.keyed);
      const ratio = keyed.throughput / base.throughput;
      const perRound = runs.keyed.map((r, i) => r.throughput / runs.plain[i].throughput);
      const list = (rs: LoadFigures[]) => rs.map((r) => Math.round(r.throughput)).join(', ');
      base.notes = `median of ${ROUNDS} runs (${list(runs.plain)} req/s)`;
      keyed.notes =
        `median of ${ROUNDS} runs (${list(runs.keyed)} req/s); keyed/keyless = ${ratio.toFixed(2)}×, cost ${percent(1 - ratio)} ` +
        `(per round: ${perRound.map((r) => `${r.toFixed(2)}×`).join(', ')}; their median ${median(perRound).toFixed(2)}×); target ≥ 0.85×`;
      keyed.baseline = PLAIN;
      ctx.log(`ingest with a new Idempotency-Key on every request: ${ratio.toFixed(2)}× of ingest without one (median of the rounds: ${median(perRound).toFixed(2)}×; target ≥ 0.85×)`);
      return [base, keyed];
    } finally {
      for (const id of ids) {
        await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', `/v1/webhooks/${id}/archive`).catch((e) => ctx.log(`archive: ${e.message}`));
        await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', `/v1/webhooks/${id}/destroy`, undefined, 60_000).catch((e) => ctx.log(`destroy: ${e.message}`));
      }
    }
  },
};

export default ingestIdempotencyCost;
