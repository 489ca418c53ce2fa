// `relay ingest send WEBHOOK_ID --data …`: an event into the webhook's HTTP ingest, as a producer would send it.
import { readFileSync } from 'node:fs';
import { RelayError, type Output } from './output.ts';
import type { RestClient } from './rest.ts';

export interface IngestSendOptions {
  data: string;
  contentType?: string;
  idempotencyKey?: string;
  ingestSecret?: string;
  header?: string[];
}

/** `@file.json` reads the file, `@-` standard input, anything else is the body itself. */
export function readData(data: string): Buffer {
  if (!data.startsWith('@')) return Buffer.from(data, 'utf8');
  const file = data.slice(1);
  try {
    return readFileSync(file === '-' ? 0 : file);
  } catch (err) {
    throw new RelayError('unreadable_data', `cannot read ${file === '-' ? 'standard input' : file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function parseHeader(h: string): [string, string] {
  const at = h.indexOf(':');
  if (at <= 0) throw new RelayError('invalid_header', `--header takes "Name: value" (got ${JSON.stringify(h)}).`);
  return [h.slice(0, at).trim().toLowerCase(), h.slice(at + 1).trim()];
}

export async function ingestSend(api: RestClient, webhookId: string, opts: IngestSendOptions, env: NodeJS.ProcessEnv, out: Output): Promise<void> {
  const secret = opts.ingestSecret ?? env.RELAY_INGEST_SECRET;
  if (!secret) {
    throw new RelayError(
      'no_ingest_secret',
      "Ingest takes the webhook's ingest secret, not the API key: pass --ingest-secret whsec_… or set RELAY_INGEST_SECRET (shown when the webhook was created, or by POST /v1/webhooks/{id}/rotate-ingest-secret).",
    );
  }
  const body = readData(opts.data);
  const webhook = await api.get<{ id: string; publicId: string }>(`/v1/webhooks/${encodeURIComponent(webhookId)}`);
  const headers: Record<string, string> = { 'content-type': opts.contentType ?? 'application/json' };
  for (const h of opts.header ?? []) {
    const [k, v] = parseHeader(h);
    headers[k] = v;
  }
  headers.authorization = `Bearer ${secret}`;
  if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
  const { body: answer, status } = await api.ingest<{ eventId: string; deliveryId: string; status: string }>(webhook.publicId, body, headers);
  out.line(`${answer.status}: event ${answer.eventId}, delivery ${answer.deliveryId} (${status})`, { type: 'ingested', httpStatus: status, ...answer });
}
