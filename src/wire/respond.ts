import type { IncomingMessage, ServerResponse } from 'node:http';
import { toHttpError } from '../errors.ts';
import { log } from '../log.ts';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendText(res: ServerResponse, status: number, text: string, contentType: string) {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A 503 (the database is away) is expected during an outage: one line, not a stack per request. */
export function logServerError(status: number, err: unknown, msg: string) {
  if (status === 503) log.warn({ err: err instanceof Error ? err.message.trim().split('\n').pop() : String(err) }, `${msg}: database unavailable`);
  else if (status >= 500) log.error({ err }, msg);
}

/** Answers with the contract's error body; unexpected errors are logged and become a bare 500. */
export function sendError(res: ServerResponse, err: unknown) {
  const { status, body, headers } = toHttpError(err);
  logServerError(status, err, 'request failed');
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, body, headers);
}

/**
 * Writes a fetch `Response` whose body is small and already complete (SOFA's JSON answers) in one
 * write: its text, with the headers it carries, instead of streaming it chunk by chunk.
 */
export async function sendFetchText(res: ServerResponse, response: Response) {
  const text = await response.text();
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key !== 'content-length' && key !== 'set-cookie') headers[key] = value;
  });
  headers['content-length'] = String(Buffer.byteLength(text));
  res.writeHead(response.status, headers);
  res.end(text);
}

/** Writes a fetch `Response` (from SOFA or yoga) to a node response, streaming its body. */
export async function sendFetchResponse(res: ServerResponse, response: Response) {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key === 'set-cookie') return;
    headers[key] = value;
  });
  const cookies = response.headers.getSetCookie?.();
  if (cookies?.length) headers['set-cookie'] = cookies;
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  // A stream's end (a subscription's, which releases what it holds) comes from here: a client
  // that went away before this point (a subscription is set up before its response exists) is
  // not heard of through 'close' any more.
  if (res.destroyed || res.socket?.destroyed) cancel();
  else res.once('close', cancel);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        // Until the client reads on, or goes away.
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off('drain', go);
            res.off('close', go);
            resolve();
          };
          res.once('drain', go);
          res.once('close', go);
        });
      }
    }
  } catch {
    // client went away mid-stream
  }
  res.end();
}

/** How long a connection whose upload was refused part-way stays open after its answer (see closeAfterAnswer). */
const LINGER_MS = 2_000;

/**
 * Ends the connection of a request whose body is not read to its end (refused part-way): the answer
 * goes out with `connection: close`, then the connection is closed, without reading the rest.
 * Closed at once with the upload's bytes unread, the kernel would reset it rather than close it,
 * and a client still writing could see the reset before the answer (and lose the 413). So, as
 * nginx's lingering close: after the answer only the server's side ends (FIN); the connection is
 * closed once the client closes it or LINGER_MS later (a client still writing meanwhile finds the
 * connection full and reads the answer).
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
  const socket = req.socket as IncomingMessage['socket'] & { destroySoon?: () => void };
  // node:http ends a `connection: close` answer with destroySoon() (a close as soon as written): here, the FIN only.
  socket.destroySoon = () => socket.end();
  res.once('close', () => {
    // Not finished: the client went away first.
    if (!res.writableFinished) return void socket.destroy();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}
