// A loopback webhook receiver for load processes: records when each `webhook-id` first arrives.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export async function startTimingReceiver() {
  const firstSeen = new Map<string, number>();
  let requests = 0;
  const server = http.createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      requests++;
      const id = String(req.headers['webhook-id'] ?? req.headers['x-job-id'] ?? '');
      if (id && !firstSeen.has(id)) firstSeen.set(id, performance.timeOrigin + performance.now());
      res.writeHead(204);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    firstSeen,
    get requests() {
      return requests;
    },
    /** Resolves when `count` distinct ids arrived, or rejects after `timeoutMs`. */
    async waitFor(count: number, timeoutMs: number) {
      const deadline = Date.now() + timeoutMs;
      while (firstSeen.size < count) {
        if (Date.now() > deadline) throw new Error(`receiver saw ${firstSeen.size} of ${count} deliveries within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
