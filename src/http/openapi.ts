import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLSchema,
  isInputObjectType,
  isNonNullType,
  isObjectType,
  isScalarType,
  getNamedType,
} from 'graphql';
import {
  AlreadyExists,
  FileGone,
  IdempotencyKeyInProgress,
  IdempotencyKeyReused,
  InvalidCursor,
  InvalidLimit,
  InvalidSignature,
  InvalidRequest,
  InvalidState,
  Internal,
  NotFound,
  OriginNotAllowed,
  PayloadGone,
  PayloadTooLarge,
  QUOTA_STATUS,
  QuotaExceeded,
  Unauthorized,
  UnsupportedMediaType,
  WebhookPaused,
  type DomainError,
} from '../errors.ts';
import { DELIVER_AT_HEADER, FORM_LIMITS, INGEST_BODY_LIMIT } from '../ingest/channels.ts';
import { requireFeature } from '../projects/gates.ts';
import { MANAGEMENT_BODY_LIMIT } from '../wire/body.ts';
import { FORM_INGEST_PATH, HTTP_INGEST_PATH } from '../wire/ingest-paths.ts';
import { BYTES_ROUTES, REST_ROUTES, type BytesRoute, type RestRoute } from './routes.ts';

/**
 * The OpenAPI 3.1 document of the service, built once per process: SOFA's description of the
 * `/v1` routes (generated from the GraphQL schema: component schemas, parameters, bodies,
 * answers) completed from the route table (operationId, tag, status, form bodies, errors) and the
 * GraphQL descriptions, plus the plain HTTP routes beside it (ingest, health) and the outbound
 * delivery (`webhooks`). Nothing here restates a GraphQL type.
 */

// any: the document is built and edited as plain JSON, read at any depth (SOFA's part of it too).
type Json = Record<string, any>;


/** How SOFA writes the custom scalars in schemas, parameters and bodies. */
export const OPENAPI_SCALARS: Readonly<Record<string, Readonly<Json>>> = Object.freeze({
  JSON: Object.freeze({ description: 'Any JSON value.' }),
  DateTime: Object.freeze({ type: 'string', format: 'date-time' }),
  SafeInt: Object.freeze({ type: 'integer', format: 'int64', minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
  UnixTime: Object.freeze({ type: 'integer', format: 'int64', description: 'Unix time in seconds.' }),
});

/**
 * OPENAPI_SCALARS as SOFA is given them: each read a fresh copy. SOFA hands the object it reads to
 * a parameter or body property as is and then writes that property's description into it, so one
 * shared object took the first JSON argument's description (a retry policy's) to every JSON field
 * of the document, and a second document built in the same process differed from the first.
 */
export function sofaScalars(): Record<string, Json> {
  const fresh: Record<string, Json> = {};
  for (const [name, schema] of Object.entries(OPENAPI_SCALARS)) Object.defineProperty(fresh, name, { enumerable: true, get: () => ({ ...schema }) });
  return fresh;
}

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
const errorContent = (examples: DomainError[]) => ({
  'application/json': {
    schema: ref('schemas', 'Error'),
    examples: Object.fromEntries(examples.map((e, i) => [examples.filter((x) => x.code === e.code).length > 1 ? `${e.code}_${i}` : e.code, { value: e.toBody() }])),
  },
});

const replayQuota = (quota: 'replay_volume' | 'monthly_deliveries' | 'backlog_depth' | 'stored_payload_bytes') =>
  new QuotaExceeded({ quota, scope: 'project', limit: 100, current: 100, delta: 1, ...(QUOTA_STATUS[quota] === 429 ? { retryAfterSec: 3600 } : {}) });

/** As the gates raise it: `feature` is the feature's key. */
function tierRequiredExample(): DomainError {
  try {
    requireFeature('free', 'custom_retry_policy');
  } catch (err) {
    return err as DomainError;
  }
  throw new Error('custom_retry_policy is expected to need a paid tier');
}

/** The errors every REST route shares, once. */
function sharedComponents(): Json {
  return {
    schemas: {
      Error: {
        type: 'object',
        description: 'Every non-2xx answer has this body.',
        required: ['error'],
        properties: { error: ref('schemas', 'ErrorDetail') },
      },
      ErrorDetail: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: {
            type: 'string',
            description:
              'Machine-readable, snake_case: invalid_request, invalid_cursor, invalid_limit (400); unauthorized (401); tier_required (403); not_found (404); method_not_allowed (405); invalid_state, webhook_paused, payload_gone, quota_exceeded (409); payload_too_large (413); quota_exceeded (429); internal (500); unavailable (503). New codes may be added.',
            examples: ['invalid_request', 'quota_exceeded'],
          },
          message: { type: 'string', description: 'What went wrong, for a person.' },
          param: { type: 'string', description: 'invalid_request, invalid_cursor, invalid_limit: the parameter or body field at fault.' },
          feature: { type: 'string', description: 'tier_required: the feature that needs a higher tier.' },
          requiredTier: { type: 'string', enum: ['free', 'starter', 'pro', 'business', 'enterprise'], description: 'tier_required: the lowest tier that has the feature.' },
          quota: {
            type: 'string',
            description: 'quota_exceeded: the quota that refused the request (429 for rates and monthly counts, 409 for stored amounts).',
            examples: Object.keys(QUOTA_STATUS),
          },
          scope: { type: 'string', enum: ['project', 'webhook'], description: 'quota_exceeded: whose limit it is.' },
          limit: { type: 'integer', description: 'quota_exceeded: the limit; payload_too_large: the body limit in bytes.' },
          current: { type: 'integer', description: 'quota_exceeded: the amount used.' },
          delta: { type: 'integer', description: 'quota_exceeded: what the request would have added.' },
          retryAfterSec: { type: 'number', description: 'quota_exceeded: when the request could succeed, where known (also the Retry-After header).' },
        },
      },
    },
    headers: {
      RetryAfter: { description: 'Seconds to wait before trying again.', schema: { type: 'integer', minimum: 1 } },
    },
    responses: {
      Unauthorized: { description: 'Missing, unknown or revoked API key.', content: errorContent([new Unauthorized()]) },
      NotFound: {
        description: 'No such record in this project (a record of another project is answered the same way).',
        content: errorContent([new NotFound('webhook', 'wh_01J…')]),
      },
      TierRequired: {
        description: "The project's tier does not include the feature; `feature` and `requiredTier` say which.",
        content: errorContent([tierRequiredExample()]),
      },
      PayloadTooLarge: {
        description: `The request body is over ${MANAGEMENT_BODY_LIMIT} bytes.`,
        content: errorContent([new PayloadTooLarge(MANAGEMENT_BODY_LIMIT)]),
      },
      Internal: { description: 'Unexpected failure (never with details).', content: errorContent([new Internal()]) },
      Unavailable: {
        description: 'The database cannot be reached; try again after Retry-After.',
        headers: { 'Retry-After': ref('headers', 'RetryAfter') },
        content: { 'application/json': { schema: ref('schemas', 'Error'), example: { error: { code: 'unavailable', message: 'The database is not reachable.' } } } },
      },
    },
    securitySchemes: {
      apiKey: { type: 'http', scheme: 'bearer', description: 'A project API key: `Authorization: Bearer <API key>`.' },
    },
  };
}

const PATH_PARAM_SUBJECTS: Record<string, string> = {
  webhooks: 'webhook',
  deliveries: 'delivery',
  dlq: 'DLQ entry',
  destinations: 'destination',
  contacts: 'contact',
  messages: 'message',
  'api-keys': 'API key',
};

function pathParamDescription(route: RestRoute, name: string): string {
  const segments = route.path.split('/');
  const subject = PATH_PARAM_SUBJECTS[segments[segments.indexOf(`:${name}`) - 1]] ?? 'record';
  return `Id of the ${subject}.`;
}

/** The first sentence, without a closing parenthesis, as the operation's summary. */
function summaryOf(description: string): string {
  let first = description.split(/(?<=\.)\s|\n/)[0].replace(/\.$/, '').replace(/\s*\([^()]*\)$/, '');
  if (first.length > 80) first = first.split(/[;:]\s/)[0];
  return first.length > 100 ? `${first.slice(0, 97)}…` : first;
}

/** Nullable in GraphQL: the value may be null (3.1 writes it as a type). */
function withNull(schema: Json): Json {
  if (Object.keys(schema).length === 0 || (schema.description && Object.keys(schema).length === 1)) return schema; // any JSON value
  if (schema.$ref) {
    const { description, ...rest } = schema;
    return { anyOf: [rest, { type: 'null' }], ...(description ? { description } : {}) };
  }
  if (typeof schema.type === 'string') {
    return { ...schema, type: [schema.type, 'null'], ...(schema.enum ? { enum: [...schema.enum, null] } : {}) };
  }
  return schema;
}

function fieldOf(schema: GraphQLSchema, route: RestRoute): GraphQLField<unknown, unknown> {
  const [typeName, fieldName] = route.field.split('.');
  const type = typeName === 'Query' ? schema.getQueryType() : schema.getMutationType();
  const field = type?.getFields()[fieldName];
  if (!field) throw new Error(`REST route ${route.method} ${route.path} maps to unknown field ${route.field}`);
  return field;
}

const isList = (args: readonly GraphQLArgument[]) => args.some((a) => a.name === 'limit');
const isConversationList = (args: readonly GraphQLArgument[]) => args.some((a) => a.name === 'starting_after');
/** Arguments whose value is an object or array: bracket notation in a form body. */
const isStructured = (arg: GraphQLArgument) => {
  const named = getNamedType(arg.type);
  return isInputObjectType(named) || named.name === 'JSON' || arg.type.toString().includes('[');
};

const SHARED_LIST_PARAMETERS: Record<string, string> = { limit: 'Limit', cursor: 'Cursor' };
const SHARED_CONVERSATION_PARAMETERS: Record<string, string> = { limit: 'ConversationLimit', starting_after: 'StartingAfter', ending_before: 'EndingBefore' };

function listParameters(): Json {
  return {
    Limit: {
      name: 'limit',
      in: 'query',
      required: false,
      description: 'Page size; values outside 1..100 are clamped, a non-integer is 400 `invalid_limit`.',
      schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    },
    Cursor: {
      name: 'cursor',
      in: 'query',
      required: false,
      description: "The previous page's `nextCursor`. A cursor is signed and bound to its list and filters: a changed or foreign one is 400 `invalid_cursor`.",
      schema: { type: 'string' },
    },
    ConversationLimit: {
      name: 'limit',
      in: 'query',
      required: false,
      description: 'Page size; values outside 1..100 are clamped, a non-integer is 400 `invalid_limit`.',
      schema: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
    },
    StartingAfter: {
      name: 'starting_after',
      in: 'query',
      required: false,
      description: 'Id of the last item of the current page: answers the next page (older items). An unknown id is 400.',
      schema: { type: 'string' },
    },
    EndingBefore: {
      name: 'ending_before',
      in: 'query',
      required: false,
      description: 'Id of the first item of the current page: answers the previous page (newer items). An unknown id is 400.',
      schema: { type: 'string' },
    },
  };
}

function badRequest(route: RestRoute, args: readonly GraphQLArgument[]): Json {
  const hasBody = route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH';
  const inputs = args.filter((a) => !route.path.includes(`:${a.name}`));
  const required = inputs.find((a) => isNonNullType(a.type));
  const examples: DomainError[] = [
    required
      ? new InvalidRequest(`${required.name} is required.`, required.name)
      : hasBody
        ? new InvalidRequest('Unknown parameter: nickname.', 'nickname')
        : new InvalidRequest('Malformed path parameter id.', 'id'),
  ];
  if (isList(args)) examples.push(new InvalidLimit());
  if (args.some((a) => a.name === 'cursor')) examples.push(new InvalidCursor());
  if (isConversationList(args)) examples.push(new InvalidRequest('No item with id msg_unknown in this list.', 'starting_after'));
  return { description: 'The request is malformed: `param` names the parameter or field at fault.', content: errorContent(examples) };
}

function conflict(route: RestRoute): Json | undefined {
  const errors = route.errors ?? [];
  const cases: DomainError[] = [];
  const said: string[] = [];
  if (errors.includes('invalid_state')) {
    cases.push(new InvalidState('Cannot pause a webhook that is archived (allowed from active).'));
    said.push('`invalid_state`: the record is not in a state that allows this');
  }
  if (errors.includes('payload_gone')) {
    cases.push(new PayloadGone());
    said.push('`payload_gone`: the retained payload is gone (payload retention)');
  }
  if (errors.includes('replay_quotas')) {
    cases.push(replayQuota('backlog_depth'));
    said.push('`quota_exceeded` (`backlog_depth`): too many deliveries are pending');
  }
  if (errors.includes('drain_quota')) {
    cases.push(new QuotaExceeded({ quota: 'event_drains', scope: 'project', limit: 1, current: 1, delta: 1 }));
    said.push('`quota_exceeded` (`event_drains`): the tier allows no more drains (1 on Pro, 3 on Business)');
  }
  if (errors.includes('ingest')) {
    cases.push(new WebhookPaused(), replayQuota('backlog_depth'), replayQuota('stored_payload_bytes'));
    said.push('`webhook_paused`: the webhook is paused; `quota_exceeded` (`backlog_depth`, `stored_payload_bytes`): the event would pass a limit');
  }
  if (errors.includes('already_exists')) {
    cases.push(new AlreadyExists('The pattern example.com is already in this webhook\'s email allowlist.'));
    said.push('`already_exists`: the same entry is already there');
  }
  if (errors.includes('automation_counts')) {
    cases.push(...(['automations', 'active_automations', 'automation_versions'] as const).map((quota) => new QuotaExceeded({ quota, scope: 'project', limit: 2, current: 2, delta: 1 })));
    said.push('`quota_exceeded` (`automations`, `active_automations`, `automation_versions`): the tier\'s count is reached');
  }
  if (cases.length === 0) return undefined;
  return { description: `${said.join('; ')}.`, content: errorContent(cases) };
}

function tooManyRequests(route: RestRoute): Json | undefined {
  if (route.errors?.includes('ingest')) {
    return {
      description: '`quota_exceeded`: the monthly deliveries are used up; Retry-After says when they free.',
      headers: { 'Retry-After': ref('headers', 'RetryAfter') },
      content: errorContent([replayQuota('monthly_deliveries')]),
    };
  }
  if (route.errors?.includes('automation_counts')) {
    return {
      description: '`quota_exceeded` (`automation_worker_creations`): the versions created today (UTC) are at the limit; Retry-After says when they free.',
      headers: { 'Retry-After': ref('headers', 'RetryAfter') },
      content: errorContent([new QuotaExceeded({ quota: 'automation_worker_creations', scope: 'project', limit: 5, current: 5, delta: 1, retryAfterSec: 3600 })]),
    };
  }
  if (route.errors?.includes('automation_runs')) {
    return {
      description: '`quota_exceeded` (`automation_runs`, `automation_cpu_ms`, `automation_subrequests`, `automation_log_bytes`, `automation_concurrency`): the Automation transform may not run now; Retry-After says when it could.',
      headers: { 'Retry-After': ref('headers', 'RetryAfter') },
      content: errorContent((['automation_runs', 'automation_cpu_ms', 'automation_subrequests', 'automation_log_bytes', 'automation_concurrency'] as const).map((quota) => new QuotaExceeded({ quota, scope: 'project', limit: 100, current: 100, delta: 1, retryAfterSec: 1 }))),
    };
  }
  if (!route.errors?.includes('replay_quotas')) return undefined;
  return {
    description: '`quota_exceeded`: the replay volume (24 hours) or the monthly deliveries are used up; Retry-After says when it frees, where known.',
    headers: { 'Retry-After': ref('headers', 'RetryAfter') },
    content: errorContent([replayQuota('replay_volume'), replayQuota('monthly_deliveries')]),
  };
}

/** The failures a REST route can answer, from its shape (input, path ids, body) and the route table. */
function errorResponses(route: RestRoute, args: readonly GraphQLArgument[], pathParams: string[]): Json {
  const hasBody = route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH';
  const out: Json = {};
  if (hasBody || args.length > 0) out['400'] = badRequest(route, args);
  out['401'] = ref('responses', 'Unauthorized');
  if (route.errors?.includes('tier_required')) out['403'] = ref('responses', 'TierRequired');
  if (pathParams.length > 0 || route.errors?.includes('not_found')) out['404'] = ref('responses', 'NotFound');
  const c = conflict(route);
  if (c) out['409'] = c;
  if (hasBody) out['413'] = ref('responses', 'PayloadTooLarge');
  const t = tooManyRequests(route);
  if (t) out['429'] = t;
  out['500'] = ref('responses', 'Internal');
  out['503'] = ref('responses', 'Unavailable');
  return out;
}

function restOperation(route: RestRoute, schema: GraphQLSchema, sofaOperation: Json): Json {
  const field = fieldOf(schema, route);
  if (!field.description) throw new Error(`${route.field} has no description: write one in the schema (it is the operation's description)`);
  const pathParams = [...route.path.matchAll(/:([a-zA-Z_]+)/g)].map((m) => m[1]);
  const hasBody = route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH';
  const argsByName = new Map(field.args.map((a) => [a.name, a]));
  const shared = isConversationList(field.args) ? SHARED_CONVERSATION_PARAMETERS : isList(field.args) ? SHARED_LIST_PARAMETERS : {};

  const parameters: Json[] = [];
  for (const p of (sofaOperation.parameters ?? []) as Json[]) {
    const { description, ...schemaOnly } = p.schema ?? {};
    if (p.in === 'path') {
      parameters.push({ name: p.name, in: 'path', required: true, description: description ?? pathParamDescription(route, p.name), schema: schemaOnly });
    } else if (!hasBody) {
      if (p.name === 'limit' && route.pageSize) {
        parameters.push({ ...listParameters().Limit, schema: { type: 'integer', minimum: 1, maximum: route.pageSize.max, default: route.pageSize.def } });
        parameters[parameters.length - 1].description = `Page size; values outside 1..${route.pageSize.max} are clamped, a non-integer is 400 \`invalid_limit\`.`;
      } else if (shared[p.name]) parameters.push(ref('parameters', shared[p.name]));
      else parameters.push({ name: p.name, in: 'query', required: !!p.required, ...(description ? { description } : {}), schema: schemaOnly });
    }
    // On a write, SOFA lists the body fields as query parameters too: they are only in the body.
  }

  const operation: Json = {
    operationId: route.operationId,
    tags: [route.tag],
    summary: summaryOf(field.description),
    description: field.description,
    ...(parameters.length ? { parameters } : {}),
  };

  if (hasBody) {
    const sofaBody = sofaOperation.requestBody?.content?.['application/json']?.schema ?? { type: 'object', properties: {} };
    const properties: Json = {};
    for (const [name, prop] of Object.entries((sofaBody.properties ?? {}) as Json)) {
      if (pathParams.includes(name)) continue;
      const arg = argsByName.get(name);
      properties[name] = arg && !isNonNullType(arg.type) ? withNull(prop) : prop;
      if (properties[name].description === undefined) delete properties[name].description;
    }
    const required = ((sofaBody.required ?? []) as string[]).filter((n) => !pathParams.includes(n));
    const bodySchema = { type: 'object', additionalProperties: false, properties, ...(required.length ? { required } : {}) };
    const content: Json = { 'application/json': { schema: bodySchema } };
    if (route.form) {
      const structured = [...argsByName.values()].filter((a) => !pathParams.includes(a.name) && isStructured(a));
      content['application/x-www-form-urlencoded'] = {
        schema: bodySchema,
        ...(structured.length ? { encoding: Object.fromEntries(structured.map((a) => [a.name, { style: 'deepObject', explode: true }])) } : {}),
      };
    }
    operation.requestBody = {
      required: required.length > 0,
      description: route.form
        ? 'JSON, or a form (`application/x-www-form-urlencoded`) with bracket notation (`reactions[like][]=ana`, `attachments[0][url]=…`), with the same meaning. Unknown fields are 400.'
        : 'Unknown fields are 400.',
      content,
    };
  }

  const status = String(route.status ?? 200);
  const success = sofaOperation.responses?.['200'] ?? Object.values(sofaOperation.responses ?? {})[0];
  operation.responses = {
    [status]: {
      description: { '200': 'OK.', '201': 'Created.', '202': 'Accepted.' }[status],
      content: { 'application/json': { schema: success?.content?.['application/json']?.schema ?? {} } },
    },
    ...errorResponses(route, field.args, pathParams),
  };
  return operation;
}

/** Makes each component schema of a GraphQL type say which fields may be null. */
function nullableComponents(schemas: Json, schema: GraphQLSchema) {
  for (const [name, component] of Object.entries(schemas)) {
    const type = schema.getType(name);
    if (!type || !(isObjectType(type) || isInputObjectType(type)) || !component.properties) continue;
    for (const f of Object.values(type.getFields())) {
      if (!isNonNullType(f.type) && component.properties[f.name]) component.properties[f.name] = withNull(component.properties[f.name]);
    }
  }
}

function ingestAccepted(): Json {
  return {
    type: 'object',
    description: 'The event is stored and its delivery queued (or scheduled), in one transaction.',
    required: ['eventId', 'deliveryId', 'status'],
    properties: {
      eventId: { type: 'string', description: 'evt_…; also the webhook-id of every delivery of it.', examples: ['evt_01JD8X3R5N6Q7W9Y0Z1A2B3C4D'] },
      deliveryId: { type: 'string', description: 'del_…', examples: ['del_01JD8X3R5N6Q7W9Y0Z1A2B3C4E'] },
      status: {
        type: 'string',
        enum: ['queued', 'scheduled', 'duplicate'],
        description:
          "scheduled when x-service-deliver-at or the default delay puts it later; duplicate when the request's idempotency key was accepted within the webhook's idempotencyWindowSeconds with the same body, or the webhook's dedupeWindowSeconds is on and the provider's delivery id was accepted within it (the ids are the first request's; nothing is stored, delivered or charged).",
      },
    },
  };
}

const headerParam = (name: string, description: string, schema: Json = { type: 'string' }) => ({ name, in: 'header', required: false, description, schema });

/** CONTRACT §12: the Idempotency-Key header of HTTP and form ingest. */
const idempotencyKeyParam = () =>
  headerParam(
    'Idempotency-Key',
    "1 to 255 printable ASCII characters (else 400, `param: \"idempotency-key\"`). Per webhook, remembered for its `idempotencyWindowSeconds` (default 86400): the same key with the same body answers 202 with the first request's ids and `status: \"duplicate\"` (nothing stored or charged; checked before the quotas and the pause); with another body 422 `idempotency_key_reused`; while the first has not committed, 409 `idempotency_key_in_progress` with Retry-After. Without it, the `webhook-id` of a Standard Webhooks signature that authenticated the request is the key. Shown as the delivery's `idempotencyKey`.",
    { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
  );
const keyReused = () => ({ description: '`idempotency_key_reused`: the key was accepted with another body within the window.', content: errorContent([new IdempotencyKeyReused()]) });

/** The public routes beside `/v1`: HTTP ingest and health. */
function publicPaths(): Json {
  const ingestQuotas409 = (['stored_payload_bytes', 'backlog_depth'] as const).map((quota) => new QuotaExceeded({ quota, scope: 'project', limit: 100, current: 100, delta: 1 }));
  const ingestQuotas429 = (['ingest_rate', 'monthly_deliveries'] as const).map((quota) => new QuotaExceeded({ quota, scope: 'project', limit: 100, current: 100, delta: 1, retryAfterSec: 1 }));
  return {
    [`${HTTP_INGEST_PATH}/{publicId}`]: {
      post: {
        operationId: 'ingestEvent',
        tags: ['Ingest'],
        summary: 'Send an event to a webhook',
        description: [
          "The webhook's `ingestUrl`. The producer proves it knows the ingest secret in one of three ways: `Authorization: Bearer whsec_…`, `x-webhook-secret: whsec_…`, or a Standard Webhooks signature of the request made with the ingest secret (`webhook-id`, `webhook-timestamp`, `webhook-signature`). During a rotation's grace period both versions are accepted. Where the webhook has a provider pack (`PUT /v1/webhooks/{id}/provider`), that provider's own signature (Stripe-Signature, X-Hub-Signature-256, X-Shopify-Hmac-Sha256, …) is accepted too, verified on the raw body; a bad, stale or missing one is 401.",
          '',
          `Any body (at most ${INGEST_BODY_LIMIT} bytes) and content type; it is delivered byte for byte unless a transform changes it. Any method but GET is accepted (PUT, PATCH and DELETE behave as POST), and anything after the public id (\`${HTTP_INGEST_PATH}/{publicId}/any/path\`) and the query string are kept as the event's \`path\` and \`query\` for routing. The API key is not used here.`,
          '',
          'Answers 202 only after the event and its delivery are stored.',
          '',
          "Slack's URL verification: on a webhook with the `slack` provider pack, a correctly signed `{\"type\": \"url_verification\", \"challenge\": \"…\"}` is answered at once `200 {\"challenge\": \"…\"}` (the one answer that is not 202); nothing is stored, delivered or counted. A bad signature is 401.",
        ].join('\n'),
        security: [{ ingestBearer: [] }, { ingestSecret: [] }, { standardWebhooksSignature: [] }],
        parameters: [
          { name: 'publicId', in: 'path', required: true, description: "The webhook's `publicId` (also the last segment of its `ingestUrl`).", schema: { type: 'string' } },
          headerParam(DELIVER_AT_HEADER, 'Deliver later: an ISO 8601 date-time (UTC when it names no offset) or Unix time in seconds, at most a year ahead; a past time means now. 400 on a strict_fifo webhook.'),
          headerParam('webhook-id', 'Standard Webhooks signature: the message id (with webhook-timestamp and webhook-signature).'),
          headerParam('webhook-timestamp', 'Standard Webhooks signature: Unix time in seconds.'),
          headerParam('webhook-signature', 'Standard Webhooks signature: `v1,<base64 HMAC-SHA256>` made with the ingest secret; several may be given, space-separated.'),
          idempotencyKeyParam(),
        ],
        requestBody: {
          required: false,
          description: 'The event: any bytes, any content type.',
          content: { 'application/json': { schema: {} }, 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } }, '*/*': { schema: {} } },
        },
        responses: {
          '200': {
            description: "Slack's URL verification (CONTRACT §12), on a webhook with the `slack` provider pack and a correctly signed `url_verification` body: the challenge, answered at once; nothing stored, delivered or counted.",
            content: { 'application/json': { schema: { type: 'object', required: ['challenge'], properties: { challenge: { type: 'string', description: 'The `challenge` of the request, as sent.' } } } } },
          },
          '202': { description: 'Accepted: stored and queued (or a duplicate of an accepted request: see `status`).', content: { 'application/json': { schema: ref('schemas', 'IngestAccepted') } } },
          '400': {
            description: '`invalid_request`: a malformed `x-service-deliver-at`, or one sent to a strict_fifo webhook; a malformed `Idempotency-Key`.',
            content: errorContent([new InvalidRequest('x-service-deliver-at must be an ISO 8601 date-time or Unix time in seconds.', 'x-service-deliver-at'), new InvalidRequest('Idempotency-Key must be 1 to 255 printable ASCII characters.', 'idempotency-key')]),
          },
          '401': { description: 'No valid ingest secret or signature.', content: errorContent([new Unauthorized('Show the ingest secret (Authorization: Bearer whsec_… or x-webhook-secret: whsec_…) or sign the request the Standard Webhooks way.')]) },
          '404': { description: 'No webhook with this public id, or an archived one.', content: errorContent([new NotFound('webhook')]) },
          '409': {
            description:
              '`idempotency_key_in_progress`: a request with this key has not committed yet (Retry-After); `webhook_paused`: the webhook is paused; `quota_exceeded` (`stored_payload_bytes`, `backlog_depth`): stored payloads or pending deliveries are at their limit.',
            headers: { 'Retry-After': ref('headers', 'RetryAfter') },
            content: errorContent([new IdempotencyKeyInProgress(), new WebhookPaused(), ...ingestQuotas409]),
          },
          '413': { description: `The body is over ${INGEST_BODY_LIMIT} bytes (refused while streaming).`, content: errorContent([new PayloadTooLarge(INGEST_BODY_LIMIT)]) },
          '422': keyReused(),
          '429': {
            description: '`quota_exceeded` (`ingest_rate`, `monthly_deliveries`): too many requests per second, or the month\'s deliveries are used up; Retry-After says when to try again.',
            headers: { 'Retry-After': ref('headers', 'RetryAfter') },
            content: errorContent(ingestQuotas429),
          },
          '500': ref('responses', 'Internal'),
          '503': ref('responses', 'Unavailable'),
        },
      },
    },
    '/dashboard/login': {
      post: {
        operationId: 'dashboardSignIn',
        tags: ['Dashboard'],
        summary: 'Sign in to the dashboard',
        description:
          'The dashboard\'s sign-in form (`GET /dashboard/login` shows it). Users are created with `npm run cli -- user create --email E --project PROJECT_ID`. On success, sets an `HttpOnly`, `SameSite=Lax` session cookie (`Secure` when `PUBLIC_URL` is https) and redirects to `/dashboard`; the session ends after 12 h without a request. With the cookie, `/graphql` acts for the user\'s project only when the request also carries the session\'s `x-csrf-token` header (the dashboard page holds it). Failed sign-ins are limited per client address and per account.',
        security: [],
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: { type: 'object', required: ['email', 'password'], properties: { email: { type: 'string', format: 'email' }, password: { type: 'string', format: 'password' } } },
            },
          },
        },
        responses: {
          '303': { description: 'Signed in: the session cookie is set; `Location: /dashboard`.', headers: { 'Set-Cookie': { description: 'The session cookie.', schema: { type: 'string' } } } },
          '400': { description: 'The body is not a form (`application/x-www-form-urlencoded`).', content: errorContent([new InvalidRequest('Sign in with the form: application/x-www-form-urlencoded fields email and password.', 'content-type')]) },
          '401': { description: 'Wrong email or password: the sign-in page again (HTML), with the message.' },
          '403': { description: 'Sent from a page of another origin (an HTML page).' },
          '429': { description: 'Too many failed sign-ins from this address or for this account: the sign-in page again (HTML); Retry-After says when to try again.', headers: { 'Retry-After': ref('headers', 'RetryAfter') } },
          '503': ref('responses', 'Unavailable'),
        },
      },
    },
    '/dashboard/logout': {
      post: {
        operationId: 'dashboardSignOut',
        tags: ['Dashboard'],
        summary: 'Sign out of the dashboard',
        description: 'Ends the session of the cookie and clears the cookie. The form carries the session\'s CSRF token (`csrf`), so another site cannot sign a user out.',
        security: [],
        requestBody: { required: false, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties: { csrf: { type: 'string' } } } } } },
        responses: {
          '303': { description: 'Signed out; `Location: /dashboard/login`.' },
          '403': { description: 'The CSRF token is missing or wrong, or the request came from another origin.' },
          '503': ref('responses', 'Unavailable'),
        },
      },
    },
    '/healthz': {
      get: {
        operationId: 'getHealth',
        tags: ['Health'],
        summary: 'Whether the process is up',
        description: 'Answers 200 while the process serves HTTP; it does not touch the database.',
        security: [],
        responses: {
          '200': { description: 'Up.', content: { 'application/json': { schema: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } } } } },
        },
      },
    },
    '/readyz': {
      get: {
        operationId: 'getReadiness',
        tags: ['Health'],
        summary: 'Whether the database is reachable',
        description: 'Answers 200 when a query to the database succeeds, 503 `unavailable` when it does not.',
        security: [],
        responses: {
          '200': { description: 'Ready.', content: { 'application/json': { schema: { type: 'object', required: ['status'], properties: { status: { const: 'ready' } } } } } },
          '503': { description: 'The database cannot be reached.', content: { 'application/json': { schema: ref('schemas', 'Error'), example: { error: { code: 'unavailable', message: 'The database is not reachable.' } } } } },
        },
      },
    },
    '/metrics': {
      get: {
        operationId: 'getPrometheusMetrics',
        tags: ['Health'],
        summary: "This process's Prometheus metrics",
        description:
          'Prometheus text exposition format (docs/observability.md names every series). Served only when the process has `METRICS_TOKEN` set, to `Authorization: Bearer <METRICS_TOKEN>` (not an API key); otherwise, or with another token, 404. Each process exposes its own; worker-only processes serve it on `METRICS_PORT`.',
        security: [],
        responses: {
          '200': { description: 'The metrics.', content: { 'text/plain': { schema: { type: 'string' } } } },
          '404': { description: 'No METRICS_TOKEN configured, or the bearer token is not it.', content: errorContent([new NotFound('metrics')]) },
        },
      },
    },
  };
}

const binaryContent = { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } };
const fileAnswerHeaders = {
  'Content-Disposition': { description: '`attachment; filename="…"` (and `filename*` with the exact UTF-8 name).', schema: { type: 'string' } },
};

/** A `/v1` route that answers bytes (BYTES_ROUTES). */
function bytesOperation(route: BytesRoute): Json {
  return {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    description: route.description,
    parameters: [{ name: 'id', in: 'path', required: true, description: 'The file id (file_…).', schema: { type: 'string' } }],
    responses: {
      '200': { description: "The file's bytes, with its content type.", headers: fileAnswerHeaders, content: binaryContent },
      '401': ref('responses', 'Unauthorized'),
      '404': { description: 'No such file in this project.', content: errorContent([new NotFound('file')]) },
      '410': { description: '`payload_gone`: payload retention removed the content.', content: errorContent([new FileGone()]) },
      '500': ref('responses', 'Internal'),
      '503': ref('responses', 'Unavailable'),
    },
  };
}

/** The CORS headers of every form answer for a listed origin (CONTRACT §12). */
const corsHeaders = (): Json => ({
  'Access-Control-Allow-Origin': { description: "The request's Origin when formAllowedOrigins lists it, `*` when `*` is listed; absent otherwise.", schema: { type: 'string' } },
  Vary: { description: '`Origin` under an exact-origin list.', schema: { type: 'string' } },
});

/** Form ingest and signed file links: public routes beside `/v1`. */
function filePublicPaths(): Json {
  const fileQuota = new QuotaExceeded({ quota: 'file_storage_bytes', scope: 'project', limit: 100, current: 100, delta: 1 });
  return {
    [`${FORM_INGEST_PATH}/{publicId}`]: {
      post: {
        operationId: 'ingestForm',
        tags: ['Ingest'],
        summary: 'Send a form post to a webhook',
        description: [
          "The webhook's `formIngestUrl`, for plain HTML forms, `fetch` from browsers and `multipart/form-data` uploads. The producer shows the ingest secret as a `_secret` field, or as on HTTP ingest (header or Standard Webhooks signature); a webhook whose `formAccess` is `public` needs none (the publicId is the credential). Fields starting with `_` are controls and never delivered: `_secret`; `_redirect` (an http(s) URL: the answer is then 303 to it); `_honeypot` (non-empty: answered as accepted, nothing stored or delivered, no key recorded); `_idempotency_key` (as the `Idempotency-Key` header, which it stands in for; \"the same body\" is the fields in order, controls left out, and each file's field, filename, content type and sha256).",
          '',
          "Browsers: a request with an `Origin` the webhook's `formAllowedOrigins` does not list (`*` lists every one; `Origin: null` matches only `*`) is refused 403 `origin_not_allowed`, after authentication; a request without `Origin` is not subject to the list. Every answer (errors included) carries `Access-Control-Allow-Origin` (the origin when listed, `*` when `*` is listed; none for an origin not listed) and `Vary: Origin` under an exact list.",
          '',
          `The delivered body is the \`form.submitted\` JSON envelope (\`fields\`, a repeated name as an array; \`files\` with \`field\`, \`filename\`, \`contentType\`, \`size\`, \`sha256\` and, where the project keeps file content, \`fileRef\`). Caps, refused with 413 while streaming: ${FORM_LIMITS.fileBytes} bytes per file, ${FORM_LIMITS.postFileBytes} per post, ${FORM_LIMITS.files} files, ${FORM_LIMITS.fields} fields, ${FORM_LIMITS.fieldNameBytes}-byte names, ${FORM_LIMITS.fieldValueBytes}-byte values, ${FORM_LIMITS.fieldBytes} bytes of fields together.`,
        ].join('\n'),
        security: [{}, { ingestBearer: [] }, { ingestSecret: [] }, { standardWebhooksSignature: [] }],
        parameters: [{ name: 'publicId', in: 'path', required: true, description: "The webhook's `publicId`.", schema: { type: 'string' } }, idempotencyKeyParam(), headerParam('Origin', "The page's origin, sent by browsers: checked against `formAllowedOrigins`.")],
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': { schema: { type: 'object', additionalProperties: { type: 'string' } } },
            'multipart/form-data': { schema: { type: 'object', additionalProperties: { type: 'string' } } },
          },
        },
        responses: {
          '202': { description: 'Accepted: stored and queued (or a duplicate of an accepted post: see `status`).', headers: corsHeaders(), content: { 'application/json': { schema: ref('schemas', 'IngestAccepted') } } },
          '303': { description: 'Accepted (a duplicate too, or a honeypot post), with `_redirect`: see other.', headers: { Location: { schema: { type: 'string' } }, ...corsHeaders() } },
          '400': {
            description: 'A malformed body, a `_redirect` that is not an http(s) URL, or a malformed idempotency key.',
            headers: corsHeaders(),
            content: errorContent([new InvalidRequest('_redirect must be an absolute http or https URL.', '_redirect'), new InvalidRequest('Idempotency-Key must be 1 to 255 printable ASCII characters.', 'idempotency-key')]),
          },
          '401': { description: 'No valid ingest secret or signature (and `formAccess` is `secret`).', headers: corsHeaders(), content: errorContent([new Unauthorized('Show the ingest secret.')]) },
          '403': { description: "`origin_not_allowed`: the request's `Origin` is not in `formAllowedOrigins` (the answer carries no CORS headers).", content: errorContent([new OriginNotAllowed()]) },
          '404': { description: 'No webhook with this public id, or an archived one.', headers: corsHeaders(), content: errorContent([new NotFound('webhook')]) },
          '409': {
            description: '`idempotency_key_in_progress` (Retry-After), `webhook_paused`, or `quota_exceeded` (`file_storage_bytes`, and the ingest quotas).',
            headers: { 'Retry-After': ref('headers', 'RetryAfter'), ...corsHeaders() },
            content: errorContent([new IdempotencyKeyInProgress(), new WebhookPaused(), fileQuota]),
          },
          '413': { description: 'A cap passed (refused while streaming; nothing stored).', headers: corsHeaders(), content: errorContent([new PayloadTooLarge(FORM_LIMITS.fileBytes)]) },
          '415': { description: 'Not a form content type.', headers: corsHeaders(), content: errorContent([new UnsupportedMediaType('Form ingest takes multipart/form-data or application/x-www-form-urlencoded.')]) },
          '422': { ...keyReused(), headers: corsHeaders() },
          '429': { description: '`quota_exceeded` (`ingest_rate`, `monthly_deliveries`).', headers: { 'Retry-After': ref('headers', 'RetryAfter'), ...corsHeaders() }, content: errorContent([new QuotaExceeded({ quota: 'ingest_rate', scope: 'project', limit: 3, current: 3, delta: 1, retryAfterSec: 1 })]) },
          '500': ref('responses', 'Internal'),
          '503': ref('responses', 'Unavailable'),
        },
      },
      options: {
        operationId: 'preflightForm',
        tags: ['Ingest'],
        summary: "The form's CORS preflight",
        description:
          "What a browser asks before a `fetch` post with a non-simple header (`Idempotency-Key`) or content type. 204 with `Access-Control-Allow-Origin` (the origin when `formAllowedOrigins` lists it, `*` when `*` is listed), `Access-Control-Allow-Methods: POST`, `Access-Control-Allow-Headers: content-type, idempotency-key` and `Access-Control-Max-Age: 600`; for an origin not listed, 204 without CORS headers (the browser then refuses). No secret is needed.",
        security: [],
        parameters: [{ name: 'publicId', in: 'path', required: true, description: "The webhook's `publicId`.", schema: { type: 'string' } }, headerParam('Origin', "The page's origin.")],
        responses: {
          '204': {
            description: 'The preflight answer (CORS headers only for a listed origin).',
            headers: {
              ...corsHeaders(),
              'Access-Control-Allow-Methods': { schema: { type: 'string', const: 'POST' } },
              'Access-Control-Allow-Headers': { schema: { type: 'string', const: 'content-type, idempotency-key' } },
              'Access-Control-Max-Age': { schema: { type: 'string', const: '600' } },
            },
          },
          '404': { description: 'No webhook with this public id, or an archived one.', content: errorContent([new NotFound('webhook')]) },
        },
      },
    },
    '/files/{id}': {
      get: {
        operationId: 'getSignedFile',
        tags: ['Files'],
        summary: "A file's signed link",
        description: "A `fileRef.url`: the file's bytes without an API key, for 7 days from when the envelope was made. A bad, tampered or expired signature is 403 `invalid_signature`.",
        security: [],
        parameters: [
          { name: 'id', in: 'path', required: true, description: 'The file id.', schema: { type: 'string' } },
          { name: 'expires', in: 'query', required: true, description: 'Unix time in seconds when the link expires.', schema: { type: 'integer' } },
          { name: 'sig', in: 'query', required: true, description: 'Hex HMAC-SHA256 of the id and expiry.', schema: { type: 'string' } },
        ],
        responses: {
          '200': { description: "The file's bytes.", headers: fileAnswerHeaders, content: binaryContent },
          '403': { description: '`invalid_signature`.', content: errorContent([new InvalidSignature()]) },
          '404': { description: 'No such file.', content: errorContent([new NotFound('file')]) },
          '410': { description: '`payload_gone`.', content: errorContent([new FileGone()]) },
          '500': ref('responses', 'Internal'),
          '503': ref('responses', 'Unavailable'),
        },
      },
    },
  };
}

/** The document itself, in both encodings: served without an API key. */
function referencePaths(): Json {
  const op = (operationId: string, summary: string, type: string, schema: Json) => ({
    get: {
      operationId,
      tags: ['Reference'],
      summary,
      description: `${summary}: this document. No API key needed. The page at /docs renders it.`,
      security: [],
      responses: {
        '200': { description: 'The document.', content: { [type]: { schema } } },
      },
    },
  });
  return {
    '/v1/openapi.json': op('getOpenApiJson', 'The OpenAPI document as JSON', 'application/json', { type: 'object' }),
    '/v1/openapi.yaml': op('getOpenApiYaml', 'The OpenAPI document as YAML', 'application/yaml', { type: 'string' }),
  };
}

/** The outbound delivery, as a consumer's endpoint receives it. */
function outboundWebhooks(): Json {
  return {
    delivery: {
      post: {
        operationId: 'receiveDelivery',
        tags: ['Deliveries'],
        summary: 'A delivery to your endpoint',
        description: [
          "What a `webhook` destination receives for each delivery attempt: the ingested body byte for byte with its content type (or the transform's output), the webhook's `customHeaders` and the destination's headers, signed the Standard Webhooks way with the webhook's `signingSecret`.",
          '',
          '`webhook-id` is the event id: the same on every retry, replay and re-drive, so use it to drop duplicates. During a signing-secret rotation `webhook-signature` carries one signature per valid secret, space-separated; either verifies.',
          '',
          'Verify with the `standardwebhooks` package (npm; ports exist for other languages) over the raw body, before parsing it:',
          '',
          '```js',
          "import { Webhook } from 'standardwebhooks';",
          "const wh = new Webhook(signingSecret); // the webhook's signingSecret (whsec_…), from your configuration",
          '// rawBody: the bytes as received; throws when the signature or timestamp is wrong',
          "const payload = wh.verify(rawBody, { 'webhook-id': req.headers['webhook-id'], 'webhook-timestamp': req.headers['webhook-timestamp'], 'webhook-signature': req.headers['webhook-signature'] });",
          '```',
          '',
          "Answer 2xx to acknowledge. 408, 429, 5xx, network errors and timeouts are retried by the webhook's `retryPolicy` (a `Retry-After` on 429 and 503 is honoured); any other answer is terminal and moves the delivery to the DLQ. Redirects are not followed.",
        ].join('\n'),
        parameters: [
          { name: 'webhook-id', in: 'header', required: true, description: 'The event id (evt_…): the same on every retry and replay.', schema: { type: 'string' } },
          { name: 'webhook-timestamp', in: 'header', required: true, description: 'Unix time in seconds of this attempt.', schema: { type: 'string', pattern: '^[0-9]+$' } },
          { name: 'webhook-signature', in: 'header', required: true, description: 'Space-separated `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, one per valid signing secret.', schema: { type: 'string' } },
          { name: 'user-agent', in: 'header', required: false, description: 'webhook-service/1.0 (+standard-webhooks)', schema: { type: 'string' } },
        ],
        requestBody: { required: true, description: 'The event as ingested (or as transformed).', content: { '*/*': { schema: {} } } },
        responses: {
          '2XX': { description: 'Acknowledged: the delivery succeeded.' },
          '4XX': { description: '408 and 429 are retried; any other 4xx is terminal (the delivery goes to the DLQ).' },
          '5XX': { description: 'Retried by the retry policy.' },
        },
      },
    },
  };
}

function collectRefs(node: unknown, into: Set<string>) {
  if (Array.isArray(node)) for (const n of node) collectRefs(n, into);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') into.add(v);
      else collectRefs(v, into);
    }
  }
}

/** Drops component schemas nothing refers to (SOFA lists every type of the schema, Query and Mutation included). */
function pruneComponents(doc: Json) {
  const schemas = doc.components.schemas as Json;
  const reachable = new Set<string>();
  const pending: string[] = [];
  const roots = new Set<string>();
  collectRefs({ paths: doc.paths, webhooks: doc.webhooks, responses: doc.components.responses, parameters: doc.components.parameters }, roots);
  for (const r of roots) pending.push(r);
  while (pending.length) {
    const r = pending.pop()!;
    if (reachable.has(r)) continue;
    reachable.add(r);
    const m = /^#\/components\/schemas\/(.+)$/.exec(r);
    if (m && schemas[m[1]]) {
      const inner = new Set<string>();
      collectRefs(schemas[m[1]], inner);
      pending.push(...inner);
    }
  }
  for (const name of Object.keys(schemas)) if (!reachable.has(`#/components/schemas/${name}`)) delete schemas[name];
}

const TAGS: Json[] = [
  { name: 'Project', description: 'The project of the API key: tier, quotas, usage, API keys, audit logs.' },
  { name: 'Webhooks', description: 'Webhooks: ingest addresses, delivery controls, lifecycle (active, paused, archived), secrets, quota overrides.' },
  { name: 'Destinations', description: "Where a webhook's deliveries go: the default destination and named ones for routing." },
  { name: 'Routing', description: 'Which destination an event goes to, and how its payload is transformed.' },
  { name: 'Providers', description: "Provider packs: ingest verifies Stripe's, GitHub's, Shopify's, Slack's, Twilio's and other providers' own signatures (Starter and above)." },
  { name: 'Automations', description: 'Automations: versioned user code run in a sandbox in the event path (a webhook transform), their runs, and the egress policy of their subrequests.' },
  { name: 'Schedules', description: "Recurring schedules: the cron ingest channel, each tick an event of the schedule's webhook." },
  { name: 'Observability', description: 'Metrics and backlog of a webhook (from roll-ups), event drains and operator alerting.' },
  { name: 'Deliveries', description: 'Each delivery of an event, its attempts, replays; and the request your endpoint receives.' },
  { name: 'DLQ', description: 'Deliveries that failed for good, and their re-drive.' },
  { name: 'Files', description: 'Files of form posts and emails whose content the project keeps (Starter and above), while payload retention keeps them.' },
  { name: 'Contacts', description: 'Contacts of the conversation part; each has one conversation.' },
  { name: 'Messages', description: 'Messages of the conversations, with reactions and attachments.' },
  { name: 'Ingest', description: 'How producers send events in.' },
  { name: 'Dashboard', description: 'Sign-in and sign-out of the browser UI at /dashboard (session cookie).' },
  { name: 'Health', description: 'Liveness and readiness, for load balancers and supervisors.' },
  { name: 'Reference', description: 'This document.' },
];

const INFO_DESCRIPTION = `Conversations (contacts, messages) and webhook ingestion and delivery.

Generated from the service's GraphQL schema (\`/graphql\`, the same operations) by SOFA. The reference page is served at \`/docs\`.

**Authentication.** \`/v1\` takes a project API key: \`Authorization: Bearer <API key>\`. A record of another project answers 404, as if it did not exist. Ingest (\`${HTTP_INGEST_PATH}/{publicId}\`) takes the webhook's ingest secret instead.

**Errors.** Every non-2xx answer is \`{"error": {"code", "message", …}}\` (schema \`Error\`). Checks run in this order: authentication (401), existence (404), tier (403 \`tier_required\`), validation (400), state (409) and quotas (409 for stored amounts, 429 with \`Retry-After\` for rates and monthly counts).

**Lists.** The event part's lists take \`limit\` (1..100, default 20) and \`cursor\` and answer \`{items, nextCursor}\`; the conversation lists take \`limit\` (default 10), \`starting_after\` and \`ending_before\` and answer \`{data, has_more}\`, newest first.

**Formats.** The conversation part uses snake_case fields and Unix seconds; the event part camelCase and ISO 8601 UTC date-times.`;

export interface OpenApiInput {
  /** SOFA's document of the `/v1` routes (its paths relative to `/v1` or with it). */
  sofaDocument: Json;
  schema: GraphQLSchema;
  version: string;
}

/** Builds the whole document; pure, so it runs once per process (and in the client generator). */
export function buildOpenApiDocument({ sofaDocument, schema, version }: OpenApiInput): Json {
  const sofaPaths: Json = {};
  for (const [p, item] of Object.entries((sofaDocument.paths ?? {}) as Json)) {
    sofaPaths[(p.startsWith('/v1') ? p : `/v1${p}`).replace(/:([a-zA-Z_]+)/g, '{$1}')] = item;
  }
  const shared = sharedComponents();
  const schemas: Json = { ...structuredClone(sofaDocument.components?.schemas ?? {}) };
  nullableComponents(schemas, schema);
  for (const [name, s] of Object.entries(schemas)) if (s.title === name) delete s.title;

  const paths: Json = {};
  for (const route of REST_ROUTES) {
    const path = `/v1${route.path}`.replace(/:([a-zA-Z_]+)/g, '{$1}');
    const sofaOperation = sofaPaths[path]?.[route.method.toLowerCase()];
    if (!sofaOperation) throw new Error(`SOFA did not describe ${route.method} ${path}`);
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = restOperation(route, schema, sofaOperation);
  }
  for (const route of BYTES_ROUTES) {
    const path = `/v1${route.path}`.replace(/:([a-zA-Z_]+)/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = bytesOperation(route);
  }
  Object.assign(paths, referencePaths(), publicPaths(), filePublicPaths());

  const doc: Json = {
    openapi: '3.1.0',
    info: { title: 'Conversations and webhook delivery service', version, description: INFO_DESCRIPTION },
    servers: [{ url: '/', description: 'This service (paths include /v1).' }],
    security: [{ apiKey: [] }],
    tags: TAGS,
    paths,
    webhooks: outboundWebhooks(),
    components: {
      schemas: { ...schemas, ...shared.schemas, IngestAccepted: ingestAccepted() },
      parameters: listParameters(),
      headers: shared.headers,
      responses: shared.responses,
      securitySchemes: {
        ...shared.securitySchemes,
        ingestBearer: { type: 'http', scheme: 'bearer', description: 'Ingest only: the ingest secret as a bearer token, `Authorization: Bearer whsec_…`.' },
        ingestSecret: { type: 'apiKey', in: 'header', name: 'x-webhook-secret', description: 'Ingest only: the ingest secret, `x-webhook-secret: whsec_…`.' },
        standardWebhooksSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'webhook-signature',
          description: 'Ingest only: a Standard Webhooks signature made with the ingest secret, with the webhook-id and webhook-timestamp headers beside it.',
        },
      },
    },
  };
  pruneComponents(doc);
  return doc;
}

/** The GraphQL scalars SOFA needs schemas for, with what OPENAPI_SCALARS lacks (a test keeps them in step). */
export function unmappedScalars(schema: GraphQLSchema): string[] {
  const builtIn = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);
  return Object.values(schema.getTypeMap())
    .filter((t) => isScalarType(t) && !builtIn.has(t.name) && !t.name.startsWith('__') && !OPENAPI_SCALARS[t.name])
    .map((t) => t.name);
}
