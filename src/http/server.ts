import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { NotFound } from '../errors.ts';
import { schema } from '../schema/index.ts';
import type { Runtime } from '../runtime.ts';
import { createDocsHandler } from './docs.ts';
import { createGraphQLHandler } from './graphql.ts';
import { sendError, sendJson } from '../wire/respond.ts';
import { createRestHandler } from './rest.ts';
import { REST_ROUTES } from './routes.ts';
import { httpDuration, httpRequests } from '../prom.ts';
import { createMetricsHandler } from './metrics.ts';

export interface HttpServer {
  server: http.Server;
  port: number;
  url: string;
  /** Every path prefix this server answers (the OpenAPI tests compare them with the document). */
  servedPrefixes: string[];
  /** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then closes sockets. */
  close(timeoutMs?: number): Promise<void>;
}

export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => Promise<void> | void;

/** Public routes beside GraphQL and REST (ingest, files, dashboard), by path prefix. */
export interface ExtraRoutes {
  [prefix: string]: RouteHandler;
}

const ROUTE_MATCHERS = REST_ROUTES.map((r) => ({
  method: r.method,
  re: new RegExp(`^/v1${r.path.replace(/:[A-Za-z]+/g, '[^/]+')}/?$`),
  label: r.operationId,
}));
const PREFIXES = ['/healthz', '/readyz', '/metrics', '/graphql', '/docs'];

/** The `route` label: the REST operationId, else the path group (bounded cardinality: never the raw path). */
function routeLabel(method: string, rawUrl: string, prefixes: string[]): string {
  const path = rawUrl.split('?', 1)[0];
  if (path.startsWith('/v1/')) {
    const m = ROUTE_MATCHERS.find((r) => r.method === method && r.re.test(path));
    return m ? m.label : 'v1_unmatched';
  }
  const prefix = prefixes.find((p) => path === p || path.startsWith(`${p}/`));
  return prefix ? prefix.slice(1) : 'other';
}

export async function startHttpServer(rt: Runtime, opts: { port: number; host?: string; extraRoutes?: ExtraRoutes }): Promise<HttpServer> {
  const rest = createRestHandler(rt, schema);
  const gql = createGraphQLHandler(rt, schema);
  const docs = createDocsHandler();
  const extra = Object.entries(opts.extraRoutes ?? {});
  // The `route` label's path groups: the server's own, then the mounted routes (ingest channels, files, dashboard).
  const prefixes = [...PREFIXES, ...extra.map(([prefix]) => prefix)];
  const metrics = createMetricsHandler(rt.config.METRICS_TOKEN);
  let draining = false;

  const server = http.createServer(async (req, res) => {
    if (draining) res.setHeader('connection', 'close');
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const route = routeLabel(req.method ?? 'GET', req.url ?? '/', prefixes);
      httpRequests.inc({ route, method: req.method ?? '', status: String(res.statusCode) });
      httpDuration.observe({ route }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return sendJson(res, 400, { error: { code: 'invalid_request', message: 'Malformed request URL.' } });
    }
    const path = url.pathname;
    try {
      if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
      if (path === '/readyz') {
        try {
          await rt.db.pool.query('SELECT 1');
          return sendJson(res, 200, { status: 'ready' });
        } catch {
          return sendJson(res, 503, { error: { code: 'unavailable', message: 'The database is not reachable.' } }, { 'retry-after': '2' });
        }
      }
      if (path === '/metrics') return await metrics(req, res);
      if (path === '/graphql') return await gql.handleGraphQL(req, res, url);
      if (path === '/docs' || path.startsWith('/docs/')) return docs(req, res, url);
      if (path === '/v1' || path.startsWith('/v1/')) return await rest(req, res, url);
      for (const [prefix, handler] of extra) {
        if (path === prefix || path.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`)) return await handler(req, res, url);
      }
      throw new NotFound('route');
    } catch (err) {
      sendError(res, err);
    }
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const ws = gql.attachWebSocket(server);

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${opts.port} is already in use on ${opts.host ?? '0.0.0.0'} (another server running here? set PORT)`) : err),
    );
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    servedPrefixes: ['/healthz', '/readyz', ...(rt.config.METRICS_TOKEN ? ['/metrics'] : []), '/graphql', '/docs', '/v1', ...extra.map(([prefix]) => prefix)],
    async close(timeoutMs = 10_000) {
      draining = true;
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      await ws.close();
      const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
      await closed;
      clearTimeout(timer);
    },
  };
}

