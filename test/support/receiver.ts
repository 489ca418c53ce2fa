import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  at: number;
}

/**
 * What to answer: a status (and headers/body), after `delayMs` and once `until` (if given) has
 * resolved, e.g. a gate the test opens; or a raw action on the socket.
 */
export type Reply =
  | { status: number; headers?: Record<string, string>; body?: string; delayMs?: number; until?: Promise<unknown> }
  | { hang: true }
  | { reset: true }
  | { garbage: true };

/**
 * A loopback HTTP receiver that records every request and answers by `reply(request, n)`.
 * Tracks the highest number of requests it was handling at once.
 */
export async function startReceiver(reply: (r: Received, n: number) => Reply = () => ({ status: 200 })) {
  const received: Received[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      received.push(r);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const a = reply(r, received.length);
      const done = () => inFlight--;
      if ('hang' in a) {
        res.on('close', done);
        return;
      }
      if ('reset' in a) {
        done();
        req.socket.destroy();
        return;
      }
      if ('garbage' in a) {
        done();
        req.socket.end('this is not HTTP\r\n\r\n');
        return;
      }
      const answer = () =>
        setTimeout(() => {
          done();
          res.writeHead(a.status, a.headers ?? {});
          res.end(a.body ?? '');
        }, a.delayMs ?? 0);
      if (a.until) void a.until.then(answer);
      else answer();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    get maxInFlight() {
      return maxInFlight;
    },
    /** Requests received and not yet answered. */
    get inFlight() {
      return inFlight;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A gate for `until`: replies wait on `opened` until the test calls `open()`. */
export function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}
