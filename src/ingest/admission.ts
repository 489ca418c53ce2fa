/**
 * What the ingest channels share before acceptEvent: the caps every channel applies, the event's
 * headers and query as routing sees them, and the admission of HTTP and form producers (CONTRACT §7
 * and §12). A channel imports this module, never a sibling channel.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { InvalidRequest, OriginNotAllowed, WebhookPaused } from '../errors.ts';
import { sha256Hex } from '../encryption.ts';
import { originAllowed } from '../webhook-config/form-origins.ts';
import { requestIdempotencyKey } from './idempotency-key.ts';
import { providerSigned } from '../providers/index.ts';
import type { Admission } from './accept-event.ts';
import { hasStandardSignature, presentedSecret, producerUnauthorized, secretMatches, signatureMatches } from './authenticate-producer.ts';
import { DELIVER_AT_HEADER, parseDeliverAt } from './deliver-at.ts';
import type { IngestTarget } from './find-ingest-target.ts';

/** An event's body, whatever the channel (an email's envelope included): 413 above, refused while streaming. */
export const INGEST_BODY_LIMIT = 10 * 1024 * 1024;

/** The files of one event (a form post's, an email's kept attachments). */
export const FILE_LIMITS = {
  /** One file. */
  fileBytes: 15 * 1024 * 1024,
  /** The files of one event together. */
  eventFileBytes: 50 * 1024 * 1024,
} as const;

// Credentials the producer showed are not part of the event.
const STRIPPED_HEADERS = new Set(['authorization', 'x-webhook-secret']);

export function eventHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !STRIPPED_HEADERS.has(name)) out[name] = value;
  }
  return out;
}

export function eventQuery(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of params) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** When the delivery runs: `x-service-deliver-at` (400 when malformed or on strict_fifo), else the webhook's default delay. */
function scheduleFor(target: IngestTarget, headers: IncomingHttpHeaders): Date | null {
  const raw = headers[DELIVER_AT_HEADER];
  if (typeof raw === 'string') {
    if (target.deliveryMode === 'strict_fifo') {
      throw new InvalidRequest(`${DELIVER_AT_HEADER} cannot be used on a strict_fifo webhook.`, DELIVER_AT_HEADER);
    }
    return parseDeliverAt(raw);
  }
  return target.defaultDelaySeconds ? new Date(Date.now() + target.defaultDelaySeconds * 1000) : null;
}

/** Form ingest's part of the admission (CONTRACT §12): its access mode, its origins and its idempotency key. */
export interface FormAdmission {
  /** The `_idempotency_key` control field, if given. */
  idempotencyKey?: string;
  /** sha256 of the post's fields (in order, controls left out) and files' names, types and hashes. */
  fingerprint: () => string;
}

/**
 * The producer shows the ingest secret (`Authorization: Bearer` or `x-webhook-secret`, or, on
 * form ingest, `fieldSecret`: the `_secret` field) or signs the request the Standard Webhooks
 * way; any valid version of the ingest secret counts. Where the webhook has a provider pack,
 * that provider's own signature counts too, verified on the raw body against `signedUrl` (the
 * ingest URL as configured, PUBLIC_URL); a form whose `formAccess` is `public` needs none. Then,
 * in CONTRACT §12's order: the form's origin (403), the idempotency key (400 when malformed;
 * the Idempotency-Key header, the form's field, else the webhook-id of a Standard Webhooks
 * signature that authenticated the request), validation (400: the deliver-at header, then the
 * channel's own `validate`) and state (409, left to the ingest statement when a key must be
 * answered first). Shared by the HTTP and form channels.
 */
export function admitProducer(req: IncomingMessage, body: Buffer, signedUrl: string, extra: { fieldSecret?: string; validate?: () => void; form?: FormAdmission } = {}): Admission {
  return (target) => {
    const { form } = extra;
    // A Standard Webhooks signature first: when it authenticates the request, its webhook-id is the default key.
    const signed = hasStandardSignature(req.headers) && signatureMatches(body, req.headers, target.ingestSecrets);
    const secret = signed ? undefined : presentedSecret(req.headers);
    const authenticated =
      signed ||
      (form !== undefined && target.formAccess === 'public') ||
      (secret !== undefined && secretMatches(secret, target.ingestSecrets)) ||
      (extra.fieldSecret !== undefined && extra.fieldSecret !== '' && secretMatches(extra.fieldSecret.trim(), target.ingestSecrets)) ||
      (target.providerPack !== null && providerSigned(target.providerPack, { method: req.method ?? 'POST', url: signedUrl, headers: req.headers, body }));
    if (!authenticated) throw producerUnauthorized();
    if (form && !originAllowed(target.formAllowedOrigins, req.headers.origin)) throw new OriginNotAllowed();
    const key = requestIdempotencyKey(req.headers, { field: form?.idempotencyKey, signed });
    const runAt = scheduleFor(target, req.headers);
    extra.validate?.();
    // With a key to answer, the ingest statement says paused after it (a duplicate is still a duplicate).
    if (target.status === 'paused' && !(key !== null && target.idempotencyWindowSeconds > 0)) throw new WebhookPaused();
    return { runAt, idempotency: key === null ? null : { key, fingerprint: form ? form.fingerprint : () => sha256Hex(body) } };
  };
}
