import type { IncomingMessage } from 'node:http';
import qs from 'qs';
import { InvalidRequest, PayloadTooLarge } from '../errors.ts';
import { decodeUtf8 } from '../validation.ts';

/** Management request bodies (REST and /graphql) are refused over this size (CONTRACT §4). */
export const MANAGEMENT_BODY_LIMIT = 1024 * 1024;

/** Reads the whole body, refusing (413) as soon as it passes `limit` bytes, before buffering more. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new PayloadTooLarge(limit);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw new PayloadTooLarge(limit);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
}

export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

/** Parses a management request body: JSON, or form-encoded with bracket notation (`a[b][]=c`). */
export function parseStructuredBody(raw: Buffer, contentType: string | undefined): Record<string, unknown> {
  if (raw.length === 0) return {};
  const type = mediaType(contentType);
  const text = decodeUtf8(raw);
  if (type === 'application/x-www-form-urlencoded') {
    return qs.parse(text, { depth: 10, arrayLimit: 1000, parameterLimit: 10_000, allowDots: false }) as Record<string, unknown>;
  }
  if (type === 'application/json' || type === '' || type.endsWith('+json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new InvalidRequest('The request body is not valid JSON.');
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new InvalidRequest('The request body must be a JSON object.');
    }
    return parsed as Record<string, unknown>;
  }
  throw new InvalidRequest(`Unsupported content type ${type}: send application/json or application/x-www-form-urlencoded.`);
}
