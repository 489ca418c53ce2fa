// What verifying a provider's signature costs on the ingest path: the same HTTP ingest on one
// service, to a plain webhook (the ingest secret) and to one with a Stripe provider pack (each
// request's Stripe-Signature verified over the raw body), loaded in turn in the same run.
import Stripe from 'stripe';
import { KILOBYTE_EVENT } from '../baselines/index.ts';
import type { LoadFigures, Scenario } from '../scenario.ts';
import { alternateRounds, managementCall, median, percent, runSettings, summary } from '../alternated-rounds.ts';

/** Rounds of one run per webhook, alternated (plain/stripe, stripe/plain, …) so the shared machine's drift cancels out. */
const ROUNDS = 6;
const PLAIN = 'ingest-provider-cost: ingest secret';
const STRIPE = 'ingest-provider-cost: stripe pack';
type Side = 'plain' | 'stripe';




const ingestProviderCost: Scenario = {
  name: 'ingest-provider-cost',
  description:
    'What a provider pack costs on the ingest path: POST /i/{publicId} with a ~1 KB JSON body (as ingest-http) to a plain webhook shown the ingest secret, ' +
    "and to a webhook with a Stripe provider pack sent a Stripe-Signature (made with stripe's generateTestHeaderString), verified on every request " +
    `(HMAC-SHA256 over the raw body, constant-time compare, timestamp tolerance). Same service, same run; ${ROUNDS} short runs per webhook, alternated; medians. ` +
    'cost = 1 − stripe/plain of the median throughputs.',
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
      const plain = await make('bench provider cost: plain');
      const packed = await make('bench provider cost: stripe');
      const secret = 'whsec_bench_stripe_secret';
      // The load repeats one signed request: a day's tolerance keeps its timestamp fresh for the whole run.
      const set = await managementCall(ctx.serviceUrl, ctx.apiKey, 'PUT', `/v1/webhooks/${packed.id}/provider`, { provider: 'stripe', secret, toleranceSeconds: 86_400 });
      if (set.status !== 200) throw new Error(`PUT provider answered ${set.status} ${JSON.stringify(set.body)}`);
      const signature = new Stripe('sk_test_unused').webhooks.generateTestHeaderString({ payload: KILOBYTE_EVENT, secret });
      const requests: Record<Side, { method: 'POST'; path: string; headers: Record<string, string>; body: string }> = {
        plain: { method: 'POST', path: `/i/${plain.publicId}`, headers: { 'content-type': 'application/json', 'x-webhook-secret': plain.ingestSecret }, body: KILOBYTE_EVENT },
        stripe: { method: 'POST', path: `/i/${packed.publicId}`, headers: { 'content-type': 'application/json', 'stripe-signature': signature }, body: KILOBYTE_EVENT },
      };
      for (const side of ['plain', 'stripe'] as const) {
        const probe = await fetch(`${ctx.serviceUrl}${requests[side].path}`, { ...requests[side], signal: AbortSignal.timeout(10_000) });
        const answer: any = await probe.json();
        if (probe.status !== 202 || !answer?.eventId) throw new Error(`ingest (${side}) answered ${probe.status} ${JSON.stringify(answer)}`);
        await ctx.autocannon({ ...requests[side], duration: 2, warmup: Math.min(ctx.settings.warmup, 1) });
      }
      const runs = await alternateRounds<Side>(ctx, requests, ['plain', 'stripe'], ROUNDS);
      const base = summary(PLAIN, runs.plain);
      const stripe = summary(STRIPE, runs.stripe);
      const cost = 1 - stripe.throughput / base.throughput;
      const perRound = runs.stripe.map((r, i) => 1 - r.throughput / runs.plain[i].throughput);
      const list = (rs: LoadFigures[]) => rs.map((r) => Math.round(r.throughput)).join(', ');
      base.notes = `median of ${ROUNDS} runs (${list(runs.plain)} req/s)`;
      stripe.notes =
        `median of ${ROUNDS} runs (${list(runs.stripe)} req/s); cost = 1 − stripe/plain = ${percent(cost)} ` +
        `(per round: ${perRound.map(percent).join(', ')}; their median ${percent(median(perRound))})`;
      stripe.baseline = PLAIN;
      ctx.log(`cost of verifying a Stripe signature: ${percent(cost)} of ingest throughput (median of the rounds' costs: ${percent(median(perRound))})`);
      return [base, stripe];
    } finally {
      for (const id of ids) {
        await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', `/v1/webhooks/${id}/archive`).catch((e) => ctx.log(`archive: ${e.message}`));
        await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', `/v1/webhooks/${id}/destroy`, undefined, 60_000).catch((e) => ctx.log(`destroy: ${e.message}`));
      }
    }
  },
};

export default ingestProviderCost;
