import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { GraphQLError, visit, type DocumentNode, type GraphQLSchema } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { createYoga, type Plugin } from 'graphql-yoga';
import { WebSocketServer } from 'ws';
import { domainErrorOf, InvalidRequest, isDatabaseUnavailable, toGraphQLError, Unauthorized, Unavailable } from '../errors.ts';
import { assertStorable } from '../validation.ts';
import type { Auth } from '../auth.ts';
import type { GraphQLContext } from '../graphql/builder.ts';
import { log } from '../log.ts';
import { authenticate } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { MANAGEMENT_BODY_LIMIT, readBody } from '../wire/body.ts';
import { sendError, sendFetchResponse } from '../wire/respond.ts';
import { subscribeShared } from './shared-subscriptions.ts';
import { isForeignOrigin, sessionOfRequest } from './dashboard.ts';
import { csrfMatches, sessionAuth } from '../users/service.ts';

function unauthorizedError(err: Unauthorized) {
  return toGraphQLError(err);
}

/**
 * Who a request acts for: the API key of `authorization`, else a dashboard session (CONTRACT §11)
 * from its cookie, only with the session's CSRF token (x-csrf-token header, or graphql-ws
 * connectionParams.csrfToken) and not from another origin: a cross-site request changes nothing.
 */
async function authenticateRequest(rt: Runtime, h: { authorization?: string | null; cookie?: string | null; csrf?: string | null; origin?: string | null; host?: string | null }): Promise<Auth> {
  if (h.authorization || !h.cookie) return authenticate(rt, h.authorization);
  const session = await sessionOfRequest(rt, h.cookie);
  if (!session) return authenticate(rt, h.authorization);
  if (!csrfMatches(session, h.csrf) || isForeignOrigin(h.origin, h.host, rt.config.publicUrl)) {
    throw new Unauthorized('A dashboard session needs its CSRF token in the x-csrf-token header, from the dashboard itself.');
  }
  return sessionAuth(session);
}

/** Domain errors keep their code; anything unexpected is logged and answered as `internal`. */
function maskError(error: unknown, message: string): Error {
  const d = domainErrorOf(error) ?? (isDatabaseUnavailable(error) ? new Unavailable() : undefined);
  if (d) return toGraphQLError(d, error instanceof GraphQLError ? error : undefined);
  if (error instanceof GraphQLError && !error.originalError) return error;
  // Variable coercion (before execution: no path) wraps the scalar's own GraphQLError: the caller's mistake.
  if (error instanceof GraphQLError && !error.path && error.originalError instanceof GraphQLError) {
    return new GraphQLError(error.message, { nodes: error.nodes, extensions: { code: 'invalid_request', http: { status: 400 } } });
  }
  log.error({ err: (error as { originalError?: unknown } | null)?.originalError ?? error }, 'graphql resolver failed');
  return new GraphQLError(message, { extensions: { code: 'internal', http: { status: 500 } } });
}

/** The first string of the document or its variables that cannot be stored, as a 400 (see assertStorable). */
function unstorableInput(document: DocumentNode, variables: unknown): InvalidRequest | undefined {
  try {
    assertStorable(variables ?? {}, 'variables');
    visit(document, {
      StringValue(node) {
        assertStorable(node.value, 'query');
      },
    });
  } catch (err) {
    if (err instanceof InvalidRequest) return err;
    throw err;
  }
  return undefined;
}

/** Refuses, before execution, arguments that PostgreSQL cannot hold (NUL, unpaired surrogates). */
function useStorableInput(): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const bad = unstorableInput(args.document, args.variableValues);
      if (bad) setResultAndStopExecution({ errors: [toGraphQLError(bad)] });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const bad = unstorableInput(args.document, args.variableValues);
      if (bad) setResultAndStopExecution({ errors: [toGraphQLError(bad)] });
    },
  };
}

/** GraphQL over HTTP (yoga, with SSE subscriptions) and over WebSocket (graphql-ws) on the same path. */
export function createGraphQLHandler(rt: Runtime, schema: GraphQLSchema) {
  const yoga = createYoga<{ wsAuth?: Auth }, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    logging: false,
    landingPage: false,
    // API clients authenticate with a header; no other site may send the dashboard's cookie with credentials.
    cors: { credentials: false },
    batching: { limit: 10 },
    plugins: [
      useStorableInput(),
      EnvelopArmorPlugin({
        maxDepth: { n: 15 },
        maxAliases: { n: 200 },
        costLimit: { maxCost: 50_000 },
        maxTokens: { n: 5_000 },
        blockFieldSuggestion: { enabled: true },
      }),
    ],
    context: async (initial) => {
      if (initial.wsAuth) return { rt, auth: initial.wsAuth };
      try {
        const h = initial.request.headers;
        return {
          rt,
          auth: await authenticateRequest(rt, { authorization: h.get('authorization'), cookie: h.get('cookie'), csrf: h.get('x-csrf-token'), origin: h.get('origin'), host: h.get('host') }),
        };
      } catch (err) {
        const d = domainErrorOf(err);
        if (d instanceof Unauthorized) throw unauthorizedError(d);
        throw err;
      }
    },
    maskedErrors: { maskError },
  });

  async function handleGraphQL(req: IncomingMessage, res: ServerResponse, url: URL) {
    try {
      let body: Buffer | undefined;
      if (req.method !== 'GET' && req.method !== 'HEAD') body = await readBody(req, MANAGEMENT_BODY_LIMIT);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
      const controller = new AbortController();
      res.on('close', () => controller.abort());
      const response = await yoga.fetch(new Request(url, { method: req.method, headers, body: body as unknown as BodyInit | undefined, signal: controller.signal }), {});
      await sendFetchResponse(res, response);
    } catch (err) {
      sendError(res, err);
    }
  }

  function attachWebSocket(server: Server) {
    const wss = new WebSocketServer({ noServer: true });
    server.on('upgrade', (req, socket, head) => {
      if (new URL(req.url ?? '/', 'http://x').pathname !== '/graphql') {
        socket.destroy();
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    });
    const disposable = useServer<Record<string, unknown>, { auth?: Auth }>(
      {
        onConnect: async (ctx) => {
          const raw = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
          const csrf = ctx.connectionParams?.csrfToken;
          const req = ctx.extra.request;
          try {
            ctx.extra.auth = await authenticateRequest(rt, {
              authorization: typeof raw === 'string' ? raw : undefined,
              cookie: req.headers.cookie,
              csrf: typeof csrf === 'string' ? csrf : undefined,
              origin: req.headers.origin,
              host: req.headers.host,
            });
            return true;
          } catch {
            return false;
          }
        },
        // any: graphql-ws passes envelop's execution args, typed by neither library as the other builds them.
        execute: (args: any) => args.rootValue.execute(args),
        // Each event is executed once per distinct (project, query, variables), then shared.
        subscribe: (args: any) => subscribeShared(args, args.contextValue.auth.projectId, (e) => maskError(e, 'Unexpected error.') as GraphQLError),
        onSubscribe: async (ctx, _id, params) => {
          const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
            ...ctx,
            req: ctx.extra.request,
            socket: ctx.extra.socket,
            params,
            wsAuth: ctx.extra.auth,
          });
          const args = {
            schema,
            operationName: params.operationName,
            document: parse(params.query),
            variableValues: params.variables,
            contextValue: await contextFactory(),
            rootValue: { execute, subscribe },
          };
          const errors = validate(args.schema, args.document);
          if (errors.length) return errors;
          return args;
        },
      },
      wss,
    );
    return {
      async close() {
        for (const client of wss.clients) client.close(1001, 'Server shutting down');
        await disposable.dispose();
        await new Promise<void>((r) => wss.close(() => r()));
      },
    };
  }

  return { yoga, handleGraphQL, attachWebSocket };
}
