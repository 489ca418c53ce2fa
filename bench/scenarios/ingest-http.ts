import { KILOBYTE_EVENT } from '../baselines/index.ts';
import { ofFloor } from '../report.ts';
import type { Scenario } from '../scenario.ts';

/** Issue 29: ingest at ≥ 0.4× of the one-statement floor. */
const FLOOR_TARGET = 0.4;

const ingestHttp: Scenario = {
  name: 'ingest-http',
  description:
    'POST /i/{publicId} with the ingest secret and a ~1 KB JSON body: webhook lookup, producer auth, routing, quota checks, ' +
    'then the event, the delivery and its job in one durable transaction, answered 202. Compared with the same inserts on a bare server: the one-statement floor ' +
    `(target: ≥ ${FLOOR_TARGET.toFixed(2)}× of it).`,
  baseline: 'ingest',
  async run(ctx) {
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${ctx.serviceUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    // Deliveries a day ahead: the job runner stays idle while ingest is measured.
    const created = await api('POST', '/v1/webhooks', { name: 'bench ingest', url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 });
    if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
    const { id, publicId, ingestSecret } = created.body;
    const request = { method: 'POST' as const, path: `/i/${publicId}`, headers: { 'content-type': 'application/json', 'x-webhook-secret': ingestSecret }, body: KILOBYTE_EVENT };
    try {
      const probe = await fetch(`${ctx.serviceUrl}${request.path}`, { ...request, signal: AbortSignal.timeout(10_000) });
      const answer: any = await probe.json();
      if (probe.status !== 202 || !answer?.eventId) throw new Error(`ingest answered ${probe.status} ${JSON.stringify(answer)}`);
      const figures = await ctx.autocannon(request);
      const floorRatio = ofFloor(figures.throughput, await ctx.floor());
      const verdict = floorRatio >= FLOOR_TARGET ? 'meets' : 'misses';
      return [{ name: 'ingest-http', ...figures, floorRatio, notes: `${verdict} the target (≥ ${FLOOR_TARGET.toFixed(2)}× of the floor)` }];
    } finally {
      // Leaves the service idle: destroy removes the events, deliveries and queued jobs.
      await api('POST', `/v1/webhooks/${id}/archive`);
      await api('POST', `/v1/webhooks/${id}/destroy`);
    }
  },
};

export default ingestHttp;
