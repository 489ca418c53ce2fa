import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { InvalidRequest, MethodNotAllowed, NotFound, OriginNotAllowed, WebhookPaused } from '../errors.ts';
import { sha256Hex } from '../encryption.ts';
import { originAllowed } from '../webhook-config/form-origins.ts';
import { requestIdempotencyKey } from './idempotency-key.ts';
import { readBody } from '../wire/body.ts';
import { sendError, sendJson } from '../wire/respond.ts';
import type { Runtime } from '../runtime.ts';
import { mayBeHandshake, providerHandshake, providerSigned } from '../providers/index.ts';
import { ingestTargets } from './ingest-target-cache.ts';
import { acceptEvent, type Admission } from './accept-event.ts';
import { hasStandardSignature, presentedSecret, producerUnauthorized, secretMatches, signatureMatches } from './authenticate-producer.ts';
import { DELIVER_AT_HEADER, parseDeliverAt } from './deliver-at.ts';
import { PUBLIC_ID, type IngestTarget } from './find-ingest-target.ts';

export const INGEST_BODY_LIMIT = 10 * 1024 * 1024;
const PREFIX = '/i/';
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

/**
 * `/i/{publicId}[/path]`: HTTP ingest. Any method but GET. Unknown or archived webhooks
 * are 404, paused ones 409. Answers 202 once the event and its delivery are committed.
 * The body (at most 10 MB, refused while streaming) is read before the webhook is looked
 * up, so the lookup can open the transaction in the same round trip.
 */
export function createHttpIngestHandler(rt: Runtime) {
  return async function handleHttpIngest(req: IncomingMessage, res: ServerResponse, url: URL) {
    try {
      if (req.method === 'GET' || req.method === 'HEAD') throw new MethodNotAllowed(['POST', 'PUT', 'PATCH', 'DELETE']);
      const rest = url.pathname.slice(PREFIX.length);
      const slash = rest.indexOf('/');
      const publicId = slash === -1 ? rest : rest.slice(0, slash);
      if (!PUBLIC_ID.test(publicId)) throw new NotFound('webhook');
      const body = await readBody(req, INGEST_BODY_LIMIT);
      const signedUrl = `${rt.config.publicUrl}${url.pathname}${url.search}`;
      // Slack's URL verification, correctly signed: answered now; nothing stored, delivered or counted.
      if (mayBeHandshake(body)) {
        const handshake = await ingestTargets(rt).decide(rt, publicId, (target) => {
          if (!target || target.status === 'archived') throw new NotFound('webhook');
          return target.providerPack && providerHandshake(target.providerPack, { method: req.method ?? 'POST', url: signedUrl, headers: req.headers, body });
        });
        if (handshake) return sendJson(res, 200, handshake);
      }
      const accepted = await acceptEvent(
        rt,
        publicId,
        {
          channel: 'http',
          method: req.method ?? 'POST',
          path: slash === -1 ? '/' : rest.slice(slash),
          query: eventQuery(url.searchParams),
          headers: eventHeaders(req.headers),
          contentType: req.headers['content-type'] ?? null,
          body,
        },
        admitProducer(req, body, signedUrl),
      );
      sendJson(res, 202, accepted);
    } catch (err) {
      if (!req.readableEnded) req.resume();
      sendError(res, err);
    }
  };
}
