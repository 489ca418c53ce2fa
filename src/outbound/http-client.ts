import type http from 'node:http';
import net from 'node:net';
import { Agent } from 'undici';
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
/** Longer than any request's timeout (at most 60 s): the request's timer ends a slow connect, as a timeout. */
const CONNECT_TIMEOUT_MS = 120_000;

/** Why a request failed, from undici's error (a refused lookup comes as the error itself or as its cause). */
function failureOf(err: unknown): OutboundResult['failure'] {
  const e = err as { cause?: unknown };
  return err instanceof BlockedAddress || e?.cause instanceof BlockedAddress ? 'blocked' : 'network';
}

/**
 * Response headers as node:http gave them: a repeated header that node keeps once keeps its first
 * value (two Retry-After headers are one delay, not NaN), other repeated ones are joined with ', ',
 * and set-cookie is always a list.
 */
const SINGLE_VALUED = new Set(['age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since', 'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after', 'server', 'user-agent']);
function nodeHeaders(headers: Record<string, string | string[] | undefined>): http.IncomingHttpHeaders {
  const out: http.IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (name === 'set-cookie') out[name] = Array.isArray(value) ? value : [value];
    else if (!Array.isArray(value)) out[name] = value;
    else out[name] = SINGLE_VALUED.has(name) ? value[0] : value.join(', ');
  }
  return out;
}

/**
 * The request's headers for undici: content-length is undici's (from the body), `expect` is not
 * sent (undici refuses it; a webhook's custom headers may no longer name it, but one stored before
 * may), and a URL's user and password go as Basic authorization, as node:http sent them.
 */
function requestHeaders(url: URL, given: Record<string, string>): Record<string, string> {
  const headers: Record<string, string> = {};
  let authorization = false;
  for (const [name, value] of Object.entries(given)) {
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'expect') continue;
    if (lower === 'authorization') authorization = true;
    headers[name] = value;
  }
  if ((url.username || url.password) && !authorization) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  }
  return headers;
}

function messageOf(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string } };
  const own = e?.message || String(err);
  // undici's "fetch failed"-style wrappers say little; the cause (ECONNREFUSED, a TLS error) says what happened.
  return e?.cause?.message && !own.includes(e.cause.message) ? `${own}: ${e.cause.message}` : own;
}

/**
 * Outbound HTTP(S) for deliveries, drains and alerts: undici's keep-alive connection pools (about
 * half the CPU per request of node:http's client), lookups through the private-address guard.
 */
export function createOutboundClient(opts: { allowPrivate: boolean; maxSockets?: number }) {
  const lookup = guardedLookup(opts.allowPrivate);
  // Connecting (lookup, TCP, TLS) is bounded by each request's own timer, not undici's 10 s.
  const newAgent = () => new Agent({ connections: opts.maxSockets ?? 256, connect: { lookup, timeout: CONNECT_TIMEOUT_MS } });
  let agent = newAgent();
  /** Requests not ended yet, each with how to end it as interrupted. */
  const open = new Map<AbortController, (reason: string) => void>();
  /** Why requests are interrupted, once they are (the process is stopping: interrupt). */
  let interruptedBecause: string | null = null;

  /** One request; redirects are not followed (a 3xx is returned as is). Never throws. */
  function send(req: { url: string; method: string; headers: Record<string, string>; body: Buffer; timeoutMs: number }): Promise<OutboundResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    if (interruptedBecause !== null) return Promise.resolve({ durationMs: 0, error: interruptedBecause, failure: 'network', interrupted: true });
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      return Promise.resolve({ durationMs: 0, error: 'invalid destination URL', failure: 'blocked' });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.resolve({ durationMs: 0, error: `unsupported protocol ${url.protocol}`, failure: 'blocked' });
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host) && !opts.allowPrivate && isPrivateAddress(host)) {
      return Promise.resolve({ durationMs: 0, error: `destination is a private address (${host})`, failure: 'blocked' });
    }
    return new Promise((resolve) => {
      const abort = new AbortController();
      let settled = false;
      const finish = (r: OutboundResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        open.delete(abort);
        resolve(r);
      };
      open.set(abort, (reason) => {
        finish({ durationMs: elapsed(), error: reason, failure: 'network', interrupted: true });
        abort.abort();
      });
      const timer = setTimeout(() => {
        abort.abort();
        // A timer may fire a fraction of a millisecond early by performance.now's clock: a timeout lasted its whole time.
        finish({ durationMs: Math.max(elapsed(), req.timeoutMs), error: `timed out after ${req.timeoutMs} ms`, failure: 'timeout' });
      }, req.timeoutMs);
      const headers = requestHeaders(url, req.headers);
      (async () => {
        const res = await agent.request({
          origin: url.origin,
          path: url.pathname + url.search,
          method: req.method as 'POST',
          headers,
          body: req.body,
          signal: abort.signal,
          // The whole request's timer above bounds it.
          headersTimeout: 0,
          bodyTimeout: 0,
        });
        const chunks: Buffer[] = [];
        let size = 0;
        try {
          for await (const c of res.body as AsyncIterable<Buffer>) {
            if (size < SNIPPET_BYTES) chunks.push(c);
            size += c.length;
          }
        } catch {
          // The body broke off: the status and what came of it are the answer.
        }
        finish({
          statusCode: res.statusCode,
          headers: nodeHeaders(res.headers),
          snippet: Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString('utf8'),
          durationMs: elapsed(),
        });
      })().catch((err) => finish({ durationMs: elapsed(), error: messageOf(err), failure: failureOf(err) }));
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
      void agent.destroy().catch(() => {});
      return cuts.length;
    },
    /** Ends every open request (queued for a socket or not) and the agents' connections. */
    close() {
      for (const abort of open.keys()) abort.abort();
      open.clear();
      void agent.destroy().catch(() => {});
      // Usable again, as node's agents were after destroy(): a closed client's next request opens new connections.
      agent = newAgent();
    },
  };
}

export type OutboundClient = ReturnType<typeof createOutboundClient>;
