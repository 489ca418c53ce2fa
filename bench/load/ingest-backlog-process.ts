// Load process for the engine-alone drain: creates a webhook delivering to the given receiver and
// ingests a burst of 1 KB events over HTTP while no job runner runs, so they wait as a backlog.
import { kilobyteEvent as payload, post } from './http-post.ts';
import { serveLoadProcess } from './protocol.ts';

export interface BacklogInput {
  serviceUrl: string;
  apiKey: string;
  receiverUrl: string;
  events: number;
  connections: number;
  /** Unset: the webhook is created with the contract's default. */
  maxInFlight?: number;
}
export interface BacklogOutput {
  webhookId: string;
  events: number;
  ingestPerSec: number;
}

serveLoadProcess<BacklogInput, BacklogOutput>(async (input) => {
  const auth = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };
  const created = await post(`${input.serviceUrl}/v1/webhooks`, auth, JSON.stringify({ name: 'bench backlog', url: `${input.receiverUrl}/hook`, maxInFlight: input.maxInFlight }));
  if (created.status !== 201) throw new Error(`create webhook: ${created.status} ${created.body}`);
  const wh = JSON.parse(created.body);
  const url = `${input.serviceUrl}/i/${wh.publicId}`;
  const headers = { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' };
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: input.connections }, async () => {
      while (next < input.events) {
        const res = await post(url, headers, payload(next++));
        if (res.status !== 202) throw new Error(`ingest: ${res.status} ${res.body}`);
      }
    }),
  );
  return { webhookId: wh.id, events: input.events, ingestPerSec: input.events / ((performance.now() - started) / 1000) };
});
