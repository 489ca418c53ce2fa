import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { NotFound } from '../errors.ts';
import { metricsText } from '../prom.ts';
import { sendError } from '../wire/respond.ts';

/**
 * `GET /metrics`: this process's Prometheus text, to `Authorization: Bearer <METRICS_TOKEN>`.
 * Without a token configured, or with a wrong or missing one, it does not exist (404).
 */
export function createMetricsHandler(token: string | undefined) {
  const expected = token ? Buffer.from(token) : null;
  return async (req: http.IncomingMessage, res: http.ServerResponse) => {
    // The scheme in any case (RFC 9110: case-insensitive), the token compared in constant time.
    const [scheme, credentials = ''] = (req.headers.authorization ?? '').trim().split(/\s+/, 2);
    const given = Buffer.from(scheme.toLowerCase() === 'bearer' ? credentials : '');
    if (!expected || req.method !== 'GET' || given.length !== expected.length || !timingSafeEqual(given, expected)) throw new NotFound('metrics');
    const { contentType, body } = await metricsText();
    res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
    res.end(body);
  };
}

/** A worker-only process's `/metrics` server on its own port (METRICS_PORT). */
export async function startMetricsServer(token: string, port: number, host: string): Promise<{ port: number; close(): Promise<void> }> {
  const handle = createMetricsHandler(token);
  const server = http.createServer(async (req, res) => {
    try {
      if ((req.url ?? '/').split('?', 1)[0] !== '/metrics') throw new NotFound('metrics');
      await handle(req, res);
    } catch (err) {
      sendError(res, err);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
