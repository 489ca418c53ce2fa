import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { BlockedAddress, guardedLookup, isPrivateAddress } from './address-guard.ts';

export interface OutboundResult {
  statusCode?: number;
  headers?: http.IncomingHttpHeaders;
  /** First bytes of the response body, for the attempt record. */
  snippet?: string;
  durationMs: number;
  error?: string;
  failure?: 'network' | 'timeout' | 'blocked';
  /** The runner stopped before the request ended (interrupt): not the receiver's doing. */
  interrupted?: boolean;
}

const SNIPPET_BYTES = 2048;

export function createOutboundClient(opts: { allowPrivate: boolean; maxSockets?: number }) {
  const lookup = guardedLookup(opts.allowPrivate);
  const agentOptions = { keepAlive: true, maxSockets: opts.maxSockets ?? 256, lookup };
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);
  /** Requests not ended yet (those still waiting for a socket of their agent included), each with how to end it as interrupted. */
  const open = new Map<http.ClientRequest, (reason: string) => void>();
  /** Why requests are interrupted, once they are (the process is stopping: interrupt). */
  let interruptedBecause: string | null = null;

  /** One request; redirects are not followed (a 3xx is returned as is). Never throws. */
  function send(req: { url: string; method: string; headers: Record<string, string>; body: Buffer; timeoutMs: number }): Promise<OutboundResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
      if (interruptedBecause !== null) return resolve({ durationMs: 0, error: interruptedBecause, failure: 'network', interrupted: true });
      let url: URL;
      try {
        url = new URL(req.url);
      } catch {
        return resolve({ durationMs: 0, error: 'invalid destination URL', failure: 'blocked' });
      }
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (net.isIP(host) && !opts.allowPrivate && isPrivateAddress(host)) {
        return resolve({ durationMs: 0, error: `destination is a private address (${host})`, failure: 'blocked' });
      }
      const mod = url.protocol === 'https:' ? https : http;
      let settled = false;
      const finish = (r: OutboundResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        open.delete(request);
        resolve(r);
      };
      const request = mod.request(url, {
        method: req.method,
        headers: { ...req.headers, 'content-length': String(req.body.length) },
        agent: url.protocol === 'https:' ? httpsAgent : httpAgent,
      });
      open.set(request, (reason) => {
        finish({ durationMs: elapsed(), error: reason, failure: 'network', interrupted: true });
        request.destroy();
      });
      const timer = setTimeout(() => {
        request.destroy();
        // A timer may fire a fraction of a millisecond early by performance.now's clock: a timeout lasted its whole time.
        finish({ durationMs: Math.max(elapsed(), req.timeoutMs), error: `timed out after ${req.timeoutMs} ms`, failure: 'timeout' });
      }, req.timeoutMs);
      request.on('error', (err) => {
        const blocked = err instanceof BlockedAddress || (err as { cause?: unknown }).cause instanceof BlockedAddress;
        finish({ durationMs: elapsed(), error: err.message || String(err), failure: blocked ? 'blocked' : 'network' });
      });
      request.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < SNIPPET_BYTES) chunks.push(c);
          size += c.length;
        });
        const done = () =>
          finish({
            statusCode: res.statusCode,
            headers: res.headers,
            snippet: Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString('utf8'),
            durationMs: elapsed(),
          });
        res.on('end', done);
        res.on('error', () => done());
        res.on('aborted', () => done());
      });
      request.end(req.body);
    });
  }

  return {
    send,
    /**
     * Ends every open request at once as interrupted (a stopping runner: its attempts are recorded
     * and retried rather than keeping the process until they answer), and every later one before it
     * is made; the receivers see their requests end. Answers how many were open.
     */
    interrupt(reason: string): number {
      interruptedBecause = reason;
      const cuts = [...open.values()];
      open.clear();
      for (const cut of cuts) cut(reason);
      httpAgent.destroy();
      httpsAgent.destroy();
      return cuts.length;
    },
    /** Ends every open request (queued for a socket or not) and the agents' connections. */
    close() {
      for (const request of open.keys()) request.destroy();
      open.clear();
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

export type OutboundClient = ReturnType<typeof createOutboundClient>;
