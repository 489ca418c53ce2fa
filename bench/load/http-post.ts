// A keep-alive POST for load processes that drive the service (webhook creation, ingest).
import http from 'node:http';

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
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

/** The ~1 KB JSON event the delivery scenarios ingest. */
export const kilobyteEvent = (i: number) => JSON.stringify({ type: 'order.created', id: i, data: { note: 'x'.repeat(900) } });
