import type { IncomingMessage, ServerResponse } from 'node:http';
import { MethodNotAllowed, NotFound } from '../errors.ts';
import { readBody } from '../wire/body.ts';
import { sendError, sendJson } from '../wire/respond.ts';
import { HTTP_INGEST_PATH } from '../wire/ingest-paths.ts';
import type { Runtime } from '../runtime.ts';
import { mayBeHandshake, providerHandshake } from '../providers/index.ts';
import { ingestTargets } from './ingest-target-cache.ts';
import { acceptEvent } from './accept-event.ts';
import { admitProducer, eventHeaders, eventQuery, INGEST_BODY_LIMIT } from './admission.ts';
import { PUBLIC_ID } from './find-ingest-target.ts';
import type { IngestChannel } from './inbound-event.ts';

const PREFIX = `${HTTP_INGEST_PATH}/`;

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
        undefined,
        { origin: req.socket },
      );
      sendJson(res, 202, accepted);
    } catch (err) {
      if (!req.readableEnded) req.resume();
      sendError(res, err);
    }
  };
}

/** HTTP ingest, mounted at `/i` (HTTP_INGEST_PATH). */
export const httpChannel: IngestChannel = { name: 'http', route: { prefix: HTTP_INGEST_PATH, create: createHttpIngestHandler } };
