import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

/** Addresses a webhook service must not be steered into (SSRF): private, loopback, link-local, etc. */
export function isPrivateAddress(ip: string): boolean {
  if (net.isIPv4(ip)) {
    const [a, b] = ip.split('.').map(Number);
    return (
      a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19)) || a >= 224
    );
  }
  const v6 = ip.toLowerCase();
  if (v6.startsWith('::ffff:')) return isPrivateAddress(v6.slice(7));
  return v6 === '::' || v6 === '::1' || v6.startsWith('fc') || v6.startsWith('fd') || v6.startsWith('fe8') || v6.startsWith('fe9') || v6.startsWith('fea') || v6.startsWith('feb') || v6.startsWith('ff');
}

export class BlockedAddress extends Error {}

export function guardedLookup(allowPrivate: boolean): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return (callback as any)(err);
      const list = addresses as dns.LookupAddress[];
      const bad = !allowPrivate && list.find((a) => isPrivateAddress(a.address));
      if (bad) return (callback as any)(new BlockedAddress(`destination resolves to a private address (${bad.address})`));
      if ((options as any).all) return (callback as any)(null, list);
      (callback as any)(null, list[0].address, list[0].family);
    });
  };
}

export interface OutboundResult {
  statusCode?: number;
  headers?: http.IncomingHttpHeaders;
  /** First bytes of the response body, for the attempt record. */
  snippet?: string;
  durationMs: number;
  error?: string;
  failure?: 'network' | 'timeout' | 'blocked';
}

const SNIPPET_BYTES = 2048;

export function createOutboundClient(opts: { allowPrivate: boolean; maxSockets?: number }) {
  const lookup = guardedLookup(opts.allowPrivate);
  const agentOptions = { keepAlive: true, maxSockets: opts.maxSockets ?? 256, lookup };
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);

  /** One request; redirects are not followed (a 3xx is returned as is). Never throws. */
  function send(req: { url: string; method: string; headers: Record<string, string>; body: Buffer; timeoutMs: number }): Promise<OutboundResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
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
        resolve(r);
      };
      const request = mod.request(url, {
        method: req.method,
        headers: { ...req.headers, 'content-length': String(req.body.length) },
        agent: url.protocol === 'https:' ? httpsAgent : httpAgent,
      });
      const timer = setTimeout(() => {
        request.destroy();
        finish({ durationMs: elapsed(), error: `timed out after ${req.timeoutMs} ms`, failure: 'timeout' });
      }, req.timeoutMs);
      request.on('error', (err) => {
        const blocked = err instanceof BlockedAddress || (err as any)?.cause instanceof BlockedAddress;
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
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

export type OutboundClient = ReturnType<typeof createOutboundClient>;
