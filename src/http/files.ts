import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { MethodNotAllowed, NotFound } from '../errors.ts';
import { normalContentType, openFile, verifyFileLink, type FileMetadata } from '../files/service.ts';
import type { Runtime } from '../runtime.ts';
import { sendError } from '../wire/respond.ts';

/**
 * `attachment` with the filename (RFC 6266 / 5987): an ASCII fallback (anything outside printable
 * ASCII, quotes and backslashes as `_`) and the exact name as `filename*=UTF-8''…` (lone
 * surrogates, which have no UTF-8, as U+FFFD).
 */
export function contentDisposition(filename: string): string {
  const name = filename.toWellFormed().replace(/[\u0000-\u001f\u007f]/g, '');
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

/** Streams a file's bytes with its content type and `content-disposition: attachment`. */
export async function sendFile(rt: Runtime, res: ServerResponse, id: string, projectId: string | null): Promise<void> {
  const { file, body } = await openFile(rt, id, projectId);
  try {
    // The headers are built and written before a byte is read; the stream is closed when that fails.
    res.writeHead(200, fileHeaders(file));
  } catch (err) {
    body.destroy();
    throw err;
  }
  try {
    await pipeline(body, res);
  } catch {
    // the client went away, or the store failed mid-stream: the connection is closed
    res.destroy();
  }
}

function fileHeaders(file: FileMetadata): Record<string, string> {
  return {
    'content-type': normalContentType(file.contentType),
    'content-length': String(file.size),
    'content-disposition': contentDisposition(file.filename),
    'x-content-type-options': 'nosniff',
    'cache-control': 'private, no-store',
  };
}

/**
 * `/files/{id}?expires=…&sig=…`: a file's signed, expiring link (no API key). A bad, tampered or
 * expired signature is 403 `invalid_signature`; content removed by retention is 410 `payload_gone`.
 */
export function createSignedFileHandler(rt: Runtime) {
  return async function handleSignedFile(req: IncomingMessage, res: ServerResponse, url: URL) {
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new MethodNotAllowed(['GET']);
      const id = url.pathname.slice('/files/'.length);
      if (!id || id.includes('/')) throw new NotFound('file');
      verifyFileLink(id, url.searchParams.get('expires'), url.searchParams.get('sig'));
      await sendFile(rt, res, id, null);
    } catch (err) {
      sendError(res, err);
    }
  };
}
