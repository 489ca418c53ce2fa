import type { IncomingMessage, ServerResponse } from 'node:http';
import { filterSchema } from '@graphql-tools/utils';
import { GraphQLSchema, type GraphQLField, type GraphQLObjectType } from 'graphql';
import { Request as FetchRequest } from '@whatwg-node/fetch';
import qs from 'qs';
import YAML from 'yaml';
import { useSofa } from 'sofa-api';
import { InvalidRequest, MethodNotAllowed, NotFound, toHttpError } from '../errors.ts';
import type { Auth } from '../auth.ts';
import type { GraphQLContext } from '../graphql/builder.ts';
import { authenticate } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { log } from '../log.ts';
import { MANAGEMENT_BODY_LIMIT, parseStructuredBody, readBody } from '../wire/body.ts';
import { buildOpenApiDocument, sofaScalars } from './openapi.ts';
import { logServerError, sendError, sendFetchText, sendText } from '../wire/respond.ts';
import { assertStorable } from '../validation.ts';
import { BYTES_ROUTES, REST_ROUTES, type RestRoute } from './routes.ts';
import { sendFile } from './files.ts';
import { createCompiledExecute } from './rest-execution.ts';
import { coerceArgs } from './validate-args.ts';
import { SERVICE_VERSION } from '../version.ts';

interface CompiledRoute extends RestRoute {
  regex: RegExp;
  params: string[];
  gqlField: GraphQLField<unknown, unknown>;
}

function compile(route: RestRoute, schema: GraphQLSchema): CompiledRoute {
  const params: string[] = [];
  const pattern = route.path.replace(/:([a-zA-Z_]+)/g, (_, name) => {
    params.push(name);
    return '([^/]+)';
  });
  const [typeName, fieldName] = route.field.split('.');
  const type = typeName === 'Query' ? schema.getQueryType() : schema.getMutationType();
  const gqlField = type?.getFields()[fieldName];
  if (!gqlField) throw new Error(`REST route ${route.method} ${route.path} maps to unknown field ${route.field}`);
  return { ...route, regex: new RegExp(`^${pattern}/?$`), params, gqlField };
}

/**
 * The query string as qs reads it (bracket notation, repeated keys as arrays). Most requests carry
 * a few flat, distinct keys (`?limit=10`), which URLSearchParams reads the same way for far less.
 */
function parseQuery(url: URL): Record<string, unknown> {
  const search = url.search;
  if (search.length <= 1) return {};
  if (!/[[\]%]/.test(search)) {
    const flat: Record<string, string> = Object.create(null);
    let repeated = false;
    for (const [key, value] of url.searchParams) {
      if (Object.hasOwn(flat, key)) repeated = true;
      flat[key] = value;
    }
    if (!repeated) return flat;
  }
  return qs.parse(search.slice(1), { depth: 5, arrayLimit: 100 }) as Record<string, unknown>;
}

/** The GraphQL schema restricted to the fields the route table maps (no subscriptions). */
function restSchemaOf(schema: GraphQLSchema): GraphQLSchema {
  const routed = new Set(REST_ROUTES.map((r) => r.field));
  const filtered = filterSchema({
    schema,
    rootFieldFilter: (op, name) => op !== 'Subscription' && routed.has(`${op}.${name}`),
  }).toConfig();
  const hasFields = (t: GraphQLObjectType | null | undefined) => (t && Object.keys(t.getFields()).length > 0 ? t : undefined);
  const dropped = new Set([filtered.subscription, hasFields(filtered.mutation) ? undefined : filtered.mutation].filter(Boolean));
  return new GraphQLSchema({
    ...filtered,
    mutation: hasFields(filtered.mutation),
    subscription: undefined,
    types: filtered.types.filter((t) => !dropped.has(t as GraphQLObjectType)),
  });
}

/** SOFA over the routed part of the schema; `execution` is left out where only its document is wanted. */
export function createRestSofa(schema: GraphQLSchema, execution: Record<string, unknown> = {}) {
  return useSofa({
    basePath: '/v1',
    schema: restSchemaOf(schema),
    depthLimit: 3,
    routes: Object.fromEntries(REST_ROUTES.map((r) => [r.field, { method: r.method, path: r.path, responseStatus: r.status ?? 200 }])),
    customScalars: sofaScalars(),
    openAPI: { info: { title: 'Service REST API', version: SERVICE_VERSION } },
    ...execution,
    // any: sofa-api's options type omits the execute/context hooks it accepts and calls.
  } as any);
}

/** The service's OpenAPI document, from SOFA's description of the routes (see openapi.ts). */
export async function restOpenApiDocument(sofa: ReturnType<typeof useSofa>, schema: GraphQLSchema) {
  const sofaDocument = await (await sofa.fetch(new Request('http://localhost/v1/openapi.json'))).json();
  return buildOpenApiDocument({ sofaDocument, schema, version: SERVICE_VERSION });
}

/** What this layer hands SOFA with each request: who it acts for, and the arguments it validated. */
interface RestServerContext {
  auth: Auth;
  variables?: Record<string, unknown>;
}

/**
 * `/v1`: SOFA over the GraphQL schema, restricted to the route table. This layer only
 * authenticates, matches the route (404/405), reads and parses the body (JSON or
 * bracket-notation forms, 1 MB cap) and validates arguments; SOFA runs the field.
 */
export function createRestHandler(rt: Runtime, schema: GraphQLSchema) {
  const routes = REST_ROUTES.map((r) => compile(r, schema));
  // SOFA re-reads arguments from the request and drops explicit nulls (and falsy query values);
  // execution gets the arguments this layer already validated instead, nulls included.
  const validatedArgs = new WeakMap<object, Record<string, unknown>>();
  const executeCompiled = createCompiledExecute();
  const sofa = createRestSofa(schema, {
    // SOFA passes on the server context this layer gives each route's handler (below).
    context: (serverContext: RestServerContext): GraphQLContext => {
      const ctx: GraphQLContext = { rt, auth: serverContext.auth };
      if (serverContext.variables) validatedArgs.set(ctx, serverContext.variables);
      return ctx;
    },
    execute: (args: Parameters<typeof executeCompiled>[0]) => executeCompiled({ ...args, variableValues: validatedArgs.get(args.contextValue as object) ?? args.variableValues }),
    errorHandler: (errors: readonly unknown[]) => {
      const { status, body, headers } = toHttpError(errors[0]);
      logServerError(status, (errors[0] as { originalError?: unknown } | undefined)?.originalError ?? errors[0], 'REST request failed');
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });
    },
  });

  // Built once per process, on first request, in both encodings.
  let reference: Promise<{ json: string; yaml: string }> | undefined;
  const referenceDocument = () =>
    (reference ??= restOpenApiDocument(sofa, schema).then((doc) => ({ json: JSON.stringify(doc), yaml: YAML.stringify(doc, { aliasDuplicateObjects: false }) })));

  // SOFA's handler of each route, called directly once this layer has matched the route: fets
  // would only dispatch the request a second time (URLPattern matching, checks of a query string
  // the forwarded request does not carry, the server adapter's hooks) before calling it. A route
  // fets does not list (an internal that moved) goes through SOFA's router as a whole.
  type SofaHandler = (request: Request, context: RestServerContext) => Promise<Response>;
  const sofaRouted: SofaHandler = async (request, context) => sofa.handleRequest(request, context);
  const sofaHandlers = new Map<string, SofaHandler>();
  // SOFA's route list is internal (no public accessor); read to call its handlers directly.
  const internals = sofa as unknown as { __routes?: Array<{ method?: string; path?: string; handler?: SofaHandler }> };
  for (const route of internals.__routes ?? []) {
    if (route.method && route.path && typeof route.handler === 'function') sofaHandlers.set(`${route.method.toUpperCase()} ${route.path}`, route.handler);
  }
  const handlers = new Map<CompiledRoute, SofaHandler>();
  for (const r of routes) {
    const handler = sofaHandlers.get(`${r.method} ${r.path}`);
    if (!handler) log.warn({ route: `${r.method} ${r.path}` }, "SOFA's handler for this REST route was not found; it goes through SOFA's router");
    handlers.set(r, handler ?? sofaRouted);
  }

  // Each path without :params has its candidates (patterned routes that match it too) listed once,
  // in table order, so it costs one lookup; other paths try the patterns. The first candidate in
  // table order wins.
  const byTableOrder = (a: CompiledRoute, b: CompiledRoute) => routes.indexOf(a) - routes.indexOf(b);
  const patterned = routes.filter((r) => r.params.length > 0);
  const exact = new Map<string, CompiledRoute[]>();
  for (const r of routes) {
    if (r.params.length > 0) continue;
    const key = r.path.replace(/\/$/, '');
    exact.set(key, [...(exact.get(key) ?? []), r]);
  }
  for (const [key, candidates] of exact) {
    candidates.push(...patterned.filter((r) => r.regex.test(key)));
    candidates.sort(byTableOrder);
  }
  // Routes that answer bytes (BYTES_ROUTES), each with its handler.
  const bytesHandlers: Record<string, (res: ServerResponse, auth: { projectId: string }, params: string[]) => Promise<void>> = {
    getFileContent: (res, auth, [id]) => sendFile(rt, res, id, auth.projectId),
  };
  const bytesRoutes = BYTES_ROUTES.map((r) => {
    const handler = bytesHandlers[r.operationId];
    if (!handler) throw new Error(`no handler for the bytes route ${r.operationId}`);
    return { ...r, regex: new RegExp(`^${r.path.replace(/:([a-zA-Z_]+)/g, '([^/]+)')}/?$`), handler };
  });

  function matchRoute(method: string | undefined, sub: string): { route: CompiledRoute; match: RegExpExecArray } {
    const path = sub.length > 1 && sub.endsWith('/') ? sub.slice(0, -1) : sub;
    let candidates = exact.get(path);
    if (!candidates) {
      candidates = patterned.filter((r) => r.regex.test(sub));
      if (candidates.length === 0) throw new NotFound('route');
    }
    const hit = candidates.find((r) => r.method === method);
    if (!hit) throw new MethodNotAllowed([...new Set(candidates.map((r) => r.method))]);
    return { route: hit, match: hit.regex.exec(sub)! };
  }

  return async function handleRest(req: IncomingMessage, res: ServerResponse, url: URL) {
    try {
      const sub = url.pathname.slice('/v1'.length) || '/';
      if (req.method === 'GET' && (sub === '/openapi.json' || sub === '/openapi.yaml')) {
        const doc = await referenceDocument();
        return sendText(res, 200, sub === '/openapi.json' ? doc.json : doc.yaml, sub === '/openapi.json' ? 'application/json; charset=utf-8' : 'application/yaml; charset=utf-8');
      }
      const auth = await authenticate(rt, req.headers.authorization);
      for (const b of bytesRoutes) {
        const hit = b.method === req.method && b.regex.exec(sub);
        if (hit) {
          req.resume();
          const params = hit.slice(1).map((v) => {
            try {
              return decodeURIComponent(v);
            } catch {
              throw new InvalidRequest('Malformed path parameter.', 'id');
            }
          });
          return await b.handler(res, auth, params);
        }
      }
      const { route: r, match: m } = matchRoute(req.method, sub);
      const params: Record<string, string> = {};
      r.params.forEach((name, i) => {
        try {
          params[name] = decodeURIComponent(m[i + 1]);
        } catch {
          throw new InvalidRequest(`Malformed path parameter ${name}.`, name);
        }
      });
      const query = parseQuery(url);
      let body: Record<string, unknown> = {};
      if (r.method !== 'GET' && r.method !== 'DELETE') {
        body = parseStructuredBody(await readBody(req, MANAGEMENT_BODY_LIMIT), req.headers['content-type']);
      } else {
        req.resume();
      }
      assertStorable(params, '');
      assertStorable(query, '');
      assertStorable(body, '');
      // Path parameters win over query and body, as in SOFA.
      const variables = coerceArgs(r.gqlField.args, { ...body, ...query, ...params }, Object.keys(body));
      // SOFA routes the path and runs its operation; the arguments reach execution through the
      // context (validatedArgs), so the forwarded request carries neither query string nor body
      // (SOFA would only re-parse and re-validate them). A ponyfill Request, as @whatwg-node/server
      // builds for node requests, costs a fraction of the native one.
      const forward = new FetchRequest(`http://localhost${url.pathname}`, { method: r.method });
      return await sendFetchText(res, await handlers.get(r)!(forward, { auth, variables }));
    } catch (err) {
      sendError(res, err);
    }
  };
}
