// What the bare baseline servers share: node:http + a pg pool of the service's default size,
// nothing else. `GET /ready` answers once `prepare` has run.
import http from 'node:http';
import pg from 'pg';

/** The service's default DATABASE_POOL_SIZE, so both sides queue the same way on the pool. */
const POOL_SIZE = 20;

export type BareHandler = (req: http.IncomingMessage, res: http.ServerResponse, pool: pg.Pool) => Promise<void>;

export function sendJson(res: http.ServerResponse, status: number, body: unknown) {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

export async function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function serveBare(prepare: (pool: pg.Pool) => Promise<void>, handle: BareHandler): Promise<void> {
  const { DATABASE_URL, PORT } = process.env;
  if (!DATABASE_URL || !PORT) throw new Error('DATABASE_URL and PORT are required');
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: POOL_SIZE });
  pool.on('error', () => {});
  await prepare(pool);
  const server = http.createServer((req, res) => {
    if (req.url === '/ready') return sendJson(res, 200, { status: 'ready' });
    handle(req, res, pool).catch((err: Error) => {
      if (!res.headersSent) sendJson(res, 500, { error: err.message });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(Number(PORT), '127.0.0.1', resolve));
  const stop = () => {
    server.close();
    server.closeAllConnections();
    void pool.end().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
