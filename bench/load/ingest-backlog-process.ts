// Load process for the engine-alone drain: creates a webhook delivering to the given receiver and
// ingests a burst of 1 KB events over HTTP while no job runner runs, so they wait as a backlog.
import http from 'node:http';
import { serveLoadProcess } from './protocol.ts';

export interface BacklogInput {
  serviceUrl: string;
  apiKey: string;
  receiverUrl: string;
  events: number;
  connections: number;
  maxInFlight: number;
}
export interface BacklogOutput {
  webhookId: string;
  events: number;
  ingestPerSec: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

const payload = (i: number) => JSON.stringify({ type: 'order.created', id: i, data: { note: 'x'.repeat(900) } });

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
