import { GraphQLError } from 'graphql';

/**
 * Domain errors: every expected failure is one of these, mapped in one place to the
 * contract's body `{error:{code,message,...}}`, an HTTP status and GraphQL extensions.
 */
export class DomainError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }

  toBody() {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export class InvalidRequest extends DomainError {
  constructor(message: string, param?: string) {
    super(400, 'invalid_request', message, param ? { param } : {});
  }
}
export class InvalidCursor extends DomainError {
  constructor(message = 'The cursor is malformed or does not belong to this list and filter set.') {
    super(400, 'invalid_cursor', message, { param: 'cursor' });
  }
}
export class InvalidLimit extends DomainError {
  constructor(message = 'limit must be an integer.') {
    super(400, 'invalid_limit', message, { param: 'limit' });
  }
}
export class Unauthorized extends DomainError {
  constructor(message = 'A valid API key is required: Authorization: Bearer <API key>.') {
    super(401, 'unauthorized', message);
  }
}
export class TierRequired extends DomainError {
  constructor(feature: string, requiredTier: string) {
    super(403, 'tier_required', `${feature} requires the ${requiredTier} tier or above.`, { feature, requiredTier });
  }
}
export class NotFound extends DomainError {
  constructor(what = 'resource', id?: string) {
    super(404, 'not_found', id ? `No ${what} with id ${id}.` : `No such ${what}.`);
  }
}
export class MethodNotAllowed extends DomainError {
  constructor(allowed?: string[]) {
    super(405, 'method_not_allowed', 'This method is not allowed on this path.', {}, allowed ? { allow: allowed.join(', ') } : {});
  }
}
export class InvalidState extends DomainError {
  constructor(message: string) {
    super(409, 'invalid_state', message);
  }
}
export class WebhookPaused extends DomainError {
  constructor() {
    super(409, 'webhook_paused', 'The webhook is paused; ingest is rejected until it is resumed.');
  }
}
/** CONTRACT §12: an idempotency key already accepted with another body. */
export class IdempotencyKeyReused extends DomainError {
  constructor() {
    super(422, 'idempotency_key_reused', 'This Idempotency-Key was already used with another body on this webhook; use a new key for a new request.');
  }
}
/** CONTRACT §12: a request with the same idempotency key has not committed yet. */
export class IdempotencyKeyInProgress extends DomainError {
  constructor(retryAfterSec = 1) {
    super(409, 'idempotency_key_in_progress', 'A request with this Idempotency-Key is still being processed; retry shortly.', { retryAfterSec }, { 'retry-after': String(retryAfterSec) });
  }
}
export class AlreadyExists extends DomainError {
  constructor(message: string) {
    super(409, 'already_exists', message);
  }
}
/** CONTRACT §12: a browser form posted from an origin the webhook does not list. */
export class OriginNotAllowed extends DomainError {
  constructor() {
    super(403, 'origin_not_allowed', "This origin is not in the webhook's formAllowedOrigins.");
  }
}
/** CONTRACT §12: a mail whose sender the webhook's allowlist does not match; answered 250 and dropped, never shown as an error. */
export class SenderNotAllowed extends DomainError {
  constructor() {
    super(403, 'sender_not_allowed', "The sender is not in the webhook's email allowlist.");
  }
}
export class PayloadGone extends DomainError {
  constructor() {
    super(409, 'payload_gone', 'The retained payload needed for this operation is no longer available.');
  }
}
/** A file whose content payload retention removed (CONTRACT §7: 410 on the file routes). */
export class FileGone extends DomainError {
  constructor() {
    super(410, 'payload_gone', 'The file content is no longer kept (payload retention removed it).');
  }
}
/** A signed file link that is malformed, tampered with or expired. */
export class InvalidSignature extends DomainError {
  constructor() {
    super(403, 'invalid_signature', 'The link signature is invalid or has expired.');
  }
}
export class UnsupportedMediaType extends DomainError {
  constructor(message: string) {
    super(415, 'unsupported_media_type', message);
  }
}
export class PayloadTooLarge extends DomainError {
  constructor(limitBytes: number) {
    super(413, 'payload_too_large', `The request body exceeds the limit of ${limitBytes} bytes.`, { limit: limitBytes });
  }
}

export type QuotaName =
  | 'monthly_deliveries'
  | 'ingest_rate'
  | 'stored_payload_bytes'
  | 'file_storage_bytes'
  | 'backlog_depth'
  | 'replay_volume'
  | 'automations'
  | 'active_automations'
  | 'automation_versions'
  | 'automation_runs'
  | 'automation_cpu_ms'
  | 'automation_subrequests'
  | 'automation_log_bytes'
  | 'automation_worker_creations'
  | 'automation_concurrency'
  | 'event_drains';

/** 429 for rates and monthly counts (they free with time), 409 for stored amounts. */
export const QUOTA_STATUS: Record<QuotaName, 409 | 429> = {
  monthly_deliveries: 429,
  ingest_rate: 429,
  replay_volume: 429,
  stored_payload_bytes: 409,
  file_storage_bytes: 409,
  backlog_depth: 409,
  automations: 409,
  active_automations: 409,
  automation_versions: 409,
  automation_runs: 429,
  automation_cpu_ms: 429,
  automation_subrequests: 429,
  automation_log_bytes: 429,
  automation_worker_creations: 429,
  automation_concurrency: 429,
  event_drains: 409,
};

export class QuotaExceeded extends DomainError {
  constructor(q: { quota: QuotaName; scope: 'project' | 'webhook'; limit: number; current: number; delta: number; retryAfterSec?: number }) {
    super(
      QUOTA_STATUS[q.quota],
      'quota_exceeded',
      `The ${q.quota} quota (${q.scope}) is exhausted: limit ${q.limit}, current ${q.current}, attempted +${q.delta}.`,
      { quota: q.quota, scope: q.scope, limit: q.limit, current: q.current, delta: q.delta, ...(q.retryAfterSec !== undefined ? { retryAfterSec: q.retryAfterSec } : {}) },
      q.retryAfterSec !== undefined ? { 'retry-after': String(Math.max(1, Math.ceil(q.retryAfterSec))) } : {},
    );
  }
}

export class Unavailable extends DomainError {
  constructor(retryAfterSec = 2) {
    super(503, 'unavailable', 'The database cannot be reached; try again shortly.', {}, { 'retry-after': String(retryAfterSec) });
  }
}

// What a database that is restarting, down or unreachable looks like through pg, Prisma's pg
// adapter and graphile-worker: connection errors by errno, PostgreSQL's connection-exception
// class (08), shutdown and start-up states (57P01-57P03), and the messages pg gives a client whose
// connection broke mid-query.
const UNREACHABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08004', '08006', '08007', '08P01']);
const UNAVAILABLE_PRISMA = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
const UNAVAILABLE_ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'DatabaseDoesNotExist']);
const UNAVAILABLE_MESSAGE = /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Client was closed and is not queryable|the database system is (starting up|shutting down|in recovery mode)|terminating connection due to administrator command|Can't reach database server|server closed the connection unexpectedly/i;

/** Whether `err` (or what it wraps) says the database cannot be reached right now. */
export function isDatabaseUnavailable(err: unknown): boolean {
  let e = err as { code?: unknown; kind?: unknown; message?: unknown; cause?: unknown; originalError?: unknown; errors?: unknown } | undefined;
  for (let i = 0; e && typeof e === 'object' && i < 8; i++) {
    if (e instanceof DomainError) return false;
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && (UNREACHABLE_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_PRISMA.has(code))) return true;
    if (typeof e.kind === 'string' && UNAVAILABLE_ADAPTER_KINDS.has(e.kind)) return true;
    if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
    // AggregateError (a connection attempt to several addresses) carries its causes in `errors`.
    if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x))) return true;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return false;
}

export class Internal extends DomainError {
  constructor() {
    super(500, 'internal', 'Internal server error.');
  }
}

/** Finds the domain error behind a GraphQL error (resolvers throw DomainError; graphql-js wraps it). */
export function domainErrorOf(err: unknown): DomainError | undefined {
  let e = err as { originalError?: unknown } | undefined;
  for (let i = 0; e && i < 5; i++) {
    if (e instanceof DomainError) return e;
    e = e.originalError as typeof e;
  }
  return undefined;
}

/** The error as the contract's body and status, for REST answers. */
export function toHttpError(err: unknown): { status: number; body: unknown; headers: Record<string, string> } {
  const d = domainErrorOf(err) ?? (isDatabaseUnavailable(err) ? new Unavailable() : undefined);
  if (d) return { status: d.status, body: d.toBody(), headers: d.headers };
  if (err instanceof GraphQLError) {
    const ext = err.extensions as { code?: unknown; http?: { status?: unknown } };
    if (ext?.code && typeof ext.http?.status === 'number' && ext.http.status < 500) {
      return { status: ext.http.status, body: { error: { code: String(ext.code), message: err.message } }, headers: {} };
    }
    // Errors raised by graphql-js before execution (validation, variable coercion) are the caller's.
    if (!err.originalError && !err.path) {
      return { status: 400, body: { error: { code: 'invalid_request', message: err.message } }, headers: {} };
    }
  }
  return { status: 500, body: new Internal().toBody(), headers: {} };
}

/** GraphQL extensions for a domain error: the same code and detail fields as the REST body. */
export function toGraphQLError(err: DomainError, original?: GraphQLError): GraphQLError {
  return new GraphQLError(err.message, {
    nodes: original?.nodes,
    path: original?.path,
    source: original?.source,
    positions: original?.positions,
    originalError: err,
    extensions: { code: err.code, ...err.details, http: { status: err.status, headers: err.headers } },
  });
}
