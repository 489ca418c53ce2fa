// One delivery sent from the developer's machine to --forward-to: the request the server would have
// sent, to any address (loopback and private ones included: this machine sends it, not the server).
import http from 'node:http';
import https from 'node:https';

export interface ForwardRequest {
  method: string;
  headers: Record<string, string>;
  body: Buffer;
  timeoutMs: number;
}

export interface ForwardResult {
  statusCode?: number;
  durationMs: number;
  error?: string;
  failure?: 'network' | 'timeout';
  snippet?: string;
  retryAfter?: string;
}

const SNIPPET_BYTES = 2048;

export function createForwarder(target: URL) {
  const agentOptions = { keepAlive: true, maxSockets: 64 };
  const agent = target.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const mod = target.protocol === 'https:' ? https : http;

  /** Never throws: a refused connection or a timeout is the attempt's network error or timeout. */
  function forward(req: ForwardRequest): Promise<ForwardResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
      let settled = false;
      const finish = (r: ForwardResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      const request = mod.request(target, { method: req.method, headers: { ...req.headers, 'content-length': String(req.body.length) }, agent });
      const timer = setTimeout(() => {
        request.destroy();
        finish({ durationMs: Math.max(elapsed(), req.timeoutMs), error: `timed out after ${req.timeoutMs} ms`, failure: 'timeout' });
      }, req.timeoutMs);
      request.on('error', (err: NodeJS.ErrnoException) => finish({ durationMs: elapsed(), error: err.message || err.code || String(err), failure: 'network' }));
      request.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < SNIPPET_BYTES) chunks.push(c);
          size += c.length;
        });
        const done = () => {
          const retryAfter = res.headers['retry-after'];
          finish({
            statusCode: res.statusCode,
            durationMs: elapsed(),
            snippet: Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString('utf8'),
            ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
          });
        };
        res.on('end', done);
        res.on('error', done);
        res.on('aborted', done);
      });
      request.end(req.body);
    });
  }

  return { forward, close: () => agent.destroy() };
}
