import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { InvalidRequest, MethodNotAllowed, NotFound, WebhookPaused } from '../errors.ts';
import { readBody } from '../http/body.ts';
import { sendError, sendJson } from '../http/respond.ts';
import type { Runtime } from '../runtime.ts';
import { acceptEvent } from './accept-event.ts';
import { hasStandardSignature, presentedSecret, producerUnauthorized, secretMatches, signatureMatches } from './authenticate-producer.ts';
import { DELIVER_AT_HEADER, parseDeliverAt } from './deliver-at.ts';
import { findIngestTarget, type IngestTarget } from './find-ingest-target.ts';

export const INGEST_BODY_LIMIT = 10 * 1024 * 1024;
const PREFIX = '/i/';
// Credentials the producer showed are not part of the event.
const STRIPPED_HEADERS = new Set(['authorization', 'x-webhook-secret']);

function eventHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !STRIPPED_HEADERS.has(name)) out[name] = value;
  }
  return out;
}

function eventQuery(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of params) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** Header-only checks, in the contract's order after authentication: validation (400), then state (409). */
function scheduleFor(target: IngestTarget, headers: IncomingHttpHeaders): Date | null {
  const raw = headers[DELIVER_AT_HEADER];
  if (typeof raw === 'string') {
    if (target.deliveryMode === 'strict_fifo') {
      throw new InvalidRequest(`${DELIVER_AT_HEADER} cannot be used on a strict_fifo webhook.`, DELIVER_AT_HEADER);
    }
    const at = parseDeliverAt(raw);
    if (target.status === 'paused') throw new WebhookPaused();
    return at;
  }
  if (target.status === 'paused') throw new WebhookPaused();
  return target.defaultDelaySeconds ? new Date(Date.now() + target.defaultDelaySeconds * 1000) : null;
}

/**
 * `/i/{publicId}[/path]`: HTTP ingest. Any method but GET. The producer shows the
 * ingest secret or signs the request (Standard Webhooks); unknown or archived webhooks
 * are 404, paused ones 409. Answers 202 once the event and its delivery are committed.
 */
export function createHttpIngestHandler(rt: Runtime) {
  return async function handleHttpIngest(req: IncomingMessage, res: ServerResponse, url: URL) {
    try {
      const rest = url.pathname.slice(PREFIX.length);
      const slash = rest.indexOf('/');
      const publicId = slash === -1 ? rest : rest.slice(0, slash);
      if (req.method === 'GET' || req.method === 'HEAD') throw new MethodNotAllowed(['POST', 'PUT', 'PATCH', 'DELETE']);
      if (!publicId) throw new NotFound('webhook');

      const target = await findIngestTarget(rt.db.pool, publicId);
      if (!target || target.status === 'archived') throw new NotFound('webhook');

      // A shown secret is checked before the body is read; a signature needs the body.
      const secret = presentedSecret(req.headers);
      let runAt: Date | null = null;
      let body: Buffer;
      if (secret !== undefined) {
        if (!secretMatches(secret, target.ingestSecrets)) throw producerUnauthorized();
        runAt = scheduleFor(target, req.headers);
        body = await readBody(req, INGEST_BODY_LIMIT);
      } else {
        if (!hasStandardSignature(req.headers)) throw producerUnauthorized();
        body = await readBody(req, INGEST_BODY_LIMIT);
        if (!signatureMatches(body, req.headers, target.ingestSecrets)) throw producerUnauthorized();
        runAt = scheduleFor(target, req.headers);
      }

      const accepted = await acceptEvent(
        rt,
        target,
        {
          channel: 'http',
          method: req.method ?? 'POST',
          path: slash === -1 ? '/' : rest.slice(slash),
          query: eventQuery(url.searchParams),
          headers: eventHeaders(req.headers),
          contentType: req.headers['content-type'] ?? null,
          body,
        },
        runAt,
      );
      sendJson(res, 202, accepted);
    } catch (err) {
      if (!req.readableEnded) req.resume();
      sendError(res, err);
    }
  };
}
