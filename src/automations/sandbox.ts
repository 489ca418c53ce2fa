import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { BlockedAddress, guardedLookup, isPrivateAddress } from '../outbound/address-guard.ts';
import { log } from '../log.ts';

/**
 * The Automations sandbox, seen from the service: a small pool of worker threads, each hosting
 * the QuickJS WebAssembly engine (sandbox-worker.mjs). A run's code executes in a worker, never
 * on this thread, so a run at its CPU limit holds no delivery runner's event loop; each run gets
 * a fresh QuickJS runtime and context of its own.
 *
 * Subrequests (`ctx.fetch`) are made here, on this thread, after the egress policy allowed the
 * exact host, through the deliveries' private-address guard (guardedLookup, isPrivateAddress).
 */

export type RunStatus = 'ok' | 'error' | 'cpu_limit' | 'memory_limit' | 'subrequest_limit' | 'egress_blocked';

export interface RunLimits {
  cpuMs: number;
  memoryBytes: number;
  stackBytes: number;
  subrequests: number;
  logBytes: number;
  /** Wall time of the whole run, subrequests included. */
  wallMs: number;
  /** Longest one subrequest may take (also cut to what is left of wallMs). */
  subrequestTimeoutMs: number;
}

export type RunOutput = { kind: 'drop' } | { kind: 'string'; value: string } | { kind: 'json'; value: string };

export interface RunResult {
  status: RunStatus;
  cpuMs: number;
  subrequests: number;
  logs: string;
  logBytes: number;
  logsTruncated: boolean;
  /** A subrequest failed (network, timeout) during a run that then failed, or the engine itself failed: the attempt is retried. */
  retryable: boolean;
  error?: string;
  result?: RunOutput;
}

export interface RunRequest {
  code: string;
  /** The event, as JSON text (parsed inside the VM: no host object crosses). */
  eventJson: string;
  limits: RunLimits;
  /** Exact host names `ctx.fetch` may reach; anything else ends the run `egress_blocked`. */
  allowedHosts: readonly string[];
}

/** Largest subrequest response body handed to the code. */
const MAX_SUBREQUEST_RESPONSE_BYTES = 1024 * 1024;
/** Largest subrequest request body. */
const MAX_SUBREQUEST_BODY_BYTES = 1024 * 1024;
/** How often the watchdog looks at the workers' running segments, and the slack it gives one beyond its CPU budget. */
const WATCHDOG_INTERVAL_MS = 25;
const WATCHDOG_GRACE_MS = 50;
/** Extra time beyond a run's wall limit before its worker is presumed stuck and replaced. */
const STUCK_MARGIN_MS = 2_000;

interface FetchAnswer {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  error?: string;
  blocked?: boolean;
}

interface Slot {
  worker: Worker;
  /** The worker's running segment (see sandbox-worker.mjs): start time, run id, CPU budget left. */
  watch: { started: Float64Array; info: Int32Array };
  /** The run the watchdog ended (its result is cpu_limit; the worker's other runs are retried). */
  killed?: number;
  active: Map<number, { request: RunRequest; resolve: (r: RunResult) => void; timer: NodeJS.Timeout }>;
  checks: Map<number, { resolve: (problem: string | null) => void; reject: (err: Error) => void }>;
  ready: Promise<void>;
  /** Size of the worker's WebAssembly memory after its last run (it never shrinks). */
  wasmBytes: number;
  /** Stopped or being replaced: takes no more runs. */
  retired: boolean;
  /** Handed to a run that has not yet posted it. */
  reserved: boolean;
}

/**
 * A delivery's run waits in the process for a free worker only while the expected wait (the
 * runs ahead of it, over the workers, times a recent run's time) is at most this; beyond it,
 * its delivery waits as a job (see saturated()).
 */
const QUEUE_WAIT_MS = 50;
/** What a run is expected to take before any ran (ms). */
const INITIAL_RUN_MS = 25;

/** A worker whose WebAssembly memory grew past this after a run is replaced (its memory never shrinks). */
const RECYCLE_WASM_BYTES = 256 * 1024 * 1024;

/** An HTTP method is a token (RFC 9110 §5.6.2). */
const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;
/** Headers the code may not set: the sandbox frames and routes the request itself. */
const HOP_BY_HOP = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-connection', 'expect']);

/** Largest result a run may produce (the ingest body cap, INGEST_BODY_LIMIT). */
export const MAX_RESULT_BYTES = 10 * 1024 * 1024;

/**
 * A worker's answer, checked before this thread uses it: an `ok` run's result must be one of the
 * three shapes with a string value within MAX_RESULT_BYTES (never trust the shape of what came
 * out of a run); anything else is the run's `error`.
 */
function checkedResult(r: RunResult): RunResult {
  if (r.status !== 'ok') return r;
  const out = r.result as { kind?: unknown; value?: unknown } | undefined;
  let problem: string | null = null;
  if (!out || typeof out !== 'object') problem = 'the run produced no result';
  else if (out.kind === 'drop') problem = null;
  else if (out.kind !== 'string' && out.kind !== 'json') problem = 'the run produced no result';
  else if (typeof out.value !== 'string') problem = 'the run produced an invalid result';
  else if (out.value.length > MAX_RESULT_BYTES || Buffer.byteLength(out.value) > MAX_RESULT_BYTES) problem = `the result exceeds ${MAX_RESULT_BYTES} bytes`;
  if (!problem) return r;
  return { ...r, status: 'error', error: problem, retryable: false, result: undefined };
}

const WORKER_URL = new URL('./sandbox-worker.mjs', import.meta.url);

export class Sandbox {
  private slots: Slot[] = [];
  /** Runs waiting for a free worker (one run per worker at a time). */
  private queue: ((slot: Slot | null) => void)[] = [];
  private recycled = 0;
  /** A recent run's time in its worker (ms, moving average). */
  private runMs = INITIAL_RUN_MS;
  private nextRunId = 1;
  private closed = false;
  private readonly lookup: net.LookupFunction;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  private watchdog: NodeJS.Timeout;

  constructor(private readonly opts: { workers: number; allowPrivate: boolean; recycleWasmBytes?: number }) {
    this.watchdog = setInterval(() => this.checkSegments(), WATCHDOG_INTERVAL_MS);
    this.watchdog.unref();
    this.lookup = guardedLookup(opts.allowPrivate);
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64, lookup: this.lookup });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 64, lookup: this.lookup });
  }

  private spawn(): Slot {
    // The worker's own heap is bounded too (QuickJS's memory is a WebAssembly memory, bounded per run by its limit).
    const shared = new SharedArrayBuffer(16);
    // execArgv []: the worker is plain JavaScript and takes none of this process's loaders or preloads (tsx, --import).
    const worker = new Worker(WORKER_URL, { execArgv: [], resourceLimits: { maxOldGenerationSizeMb: 256 }, workerData: { watch: shared } });
    const slot: Slot = { worker, watch: { started: new Float64Array(shared, 0, 1), info: new Int32Array(shared, 8, 2) }, active: new Map(), checks: new Map(), ready: Promise.resolve(), wasmBytes: 0, retired: false, reserved: false };
    worker.unref();
    worker.on('message', (msg) => {
      if (msg.type === 'result') {
        const run = slot.active.get(msg.runId);
        if (!run) return;
        slot.active.delete(msg.runId);
        clearTimeout(run.timer);
        if (typeof msg.wasmBytes === 'number') slot.wasmBytes = msg.wasmBytes;
        if (typeof msg.ms === 'number' && Number.isFinite(msg.ms)) this.runMs += (Math.max(0, msg.ms) - this.runMs) / 16;
        run.resolve(checkedResult(msg.result as RunResult));
      } else if (msg.type === 'checked') {
        const done = slot.checks.get(msg.runId);
        slot.checks.delete(msg.runId);
        if (slot.active.size === 0 && slot.checks.size === 0) worker.unref();
        done?.resolve(msg.problem);
      } else if (msg.type === 'fetch') {
        const run = slot.active.get(msg.runId);
        const answer = run ? this.subrequest(run.request, msg.url, msg.init, msg.timeoutMs) : Promise.resolve<FetchAnswer>({ error: 'the run is over' });
        // Whatever happens to the subrequest, the worker is answered (and nothing escapes as an unhandled rejection).
        void answer
          .catch((err: unknown): FetchAnswer => ({ error: `the subrequest failed: ${(err as Error)?.message ?? String(err)}` }))
          .then((a) => worker.postMessage({ type: 'fetchResult', fetchId: msg.fetchId, answer: a }))
          .catch((err: unknown) => log.warn({ err }, 'could not answer an automation subrequest'));
      }
    });
    const fail = (why: string) => {
      // A new worker replaces this one at the next run (not now: a worker that cannot start must not respawn in a loop).
      slot.retired = true;
      this.slots = this.slots.filter((s) => s !== slot);
      for (const [runId, run] of slot.active) {
        clearTimeout(run.timer);
        if (runId === slot.killed) {
          const cpuMs = run.request.limits.cpuMs;
          run.resolve({ status: 'cpu_limit', error: `the run used more than its ${cpuMs} ms of CPU`, cpuMs, subrequests: 0, logs: '', logBytes: 0, logsTruncated: false, retryable: false });
        } else {
          run.resolve({ status: 'error', error: why, cpuMs: 0, subrequests: 0, logs: '', logBytes: 0, logsTruncated: false, retryable: true });
        }
      }
      slot.active.clear();
      for (const [, done] of slot.checks) done.reject(new Error(why));
      slot.checks.clear();
    };
    worker.on('error', (err) => {
      log.error({ err }, 'automation sandbox worker failed');
      fail(`sandbox failure: ${err.message}`);
    });
    worker.on('exit', () => fail('sandbox failure: the sandbox worker stopped'));
    return slot;
  }

  /** Ends a worker whose running segment outlived its run's CPU budget (a native built-in the interrupt handler cannot stop). */
  private checkSegments() {
    const now = Date.now();
    for (const slot of this.slots) {
      const started = slot.watch.started[0];
      if (!started || slot.killed !== undefined) continue;
      const budget = slot.watch.info[1];
      if (now - started > budget * 1.1 + WATCHDOG_GRACE_MS) {
        slot.killed = slot.watch.info[0];
        log.warn({ runId: slot.killed }, 'automation run outlived its CPU budget in a native call; replacing its sandbox worker');
        void slot.worker.terminate();
      }
    }
  }

  /** Spawns workers up to the pool's size: a free one, or null when every worker runs a run. */
  private freeSlot(): Slot | null {
    this.slots = this.slots.filter((s) => !s.retired);
    while (this.slots.length < this.opts.workers) this.slots.push(this.spawn());
    return this.slots.find((s) => s.active.size === 0 && !s.reserved && s.killed === undefined) ?? null;
  }

  /**
   * A worker for one run: each worker runs one run at a time (a long synchronous segment, or a
   * watchdog's terminate, then concerns that run alone); runs beyond the pool wait here, in order.
   */
  private pick(): Promise<Slot | null> {
    if (this.closed) return Promise.resolve(null);
    const free = this.queue.length === 0 ? this.freeSlot() : null;
    if (free) {
      free.reserved = true;
      return Promise.resolve(free);
    }
    return new Promise((resolve) => this.queue.push(resolve));
  }

  /** After a run: replaces a worker whose memory grew too much, then hands free workers to waiting runs. */
  private release(slot: Slot) {
    if (!slot.retired && slot.active.size === 0 && slot.checks.size === 0 && slot.wasmBytes > (this.opts.recycleWasmBytes ?? RECYCLE_WASM_BYTES)) {
      slot.retired = true;
      this.recycled++;
      log.info({ wasmBytes: slot.wasmBytes }, 'replacing an automation sandbox worker whose memory grew');
      void slot.worker.terminate();
    }
    while (this.queue.length > 0) {
      if (this.closed) {
        this.queue.shift()!(null);
        continue;
      }
      const free = this.freeSlot();
      if (!free) return;
      free.reserved = true;
      this.queue.shift()!(free);
    }
  }

  /**
   * How many runs may wait for a worker at most: as many as the workers finish within
   * QUEUE_WAIT_MS at a recent run's pace, and at least one per worker.
   */
  private maxQueue(): number {
    return Math.max(this.opts.workers, Math.floor(QUEUE_WAIT_MS / Math.max(this.runMs, 0.1)) * this.opts.workers);
  }

  /** Runs already wait for a worker as long as a delivery's run should: it is better deferred as a job than queued here. */
  saturated(): boolean {
    return this.queue.length >= this.maxQueue();
  }


  /** Workers, runs in progress, runs waiting for a worker, workers replaced for their memory. */
  stats(): { workers: number; running: number; queued: number; recycled: number } {
    const live = this.slots.filter((s) => !s.retired);
    return { workers: live.length, running: live.reduce((n, s) => n + s.active.size, 0), queued: this.queue.length, recycled: this.recycled };
  }

  /** Whether code compiles as an ES module (without running it): null, or the compiler's message. */
  check(code: string): Promise<string | null> {
    if (this.closed) throw new Error('the automation sandbox is closed');
    // A compile check is short (bounded at 1 s in the worker): it goes to the least busy worker.
    this.freeSlot();
    let slot = this.slots[0];
    for (const s of this.slots) if (s.active.size + s.checks.size < slot.active.size + slot.checks.size) slot = s;
    const runId = this.nextRunId++;
    return new Promise((resolve, reject) => {
      slot.checks.set(runId, { resolve, reject });
      slot.worker.ref();
      slot.worker.postMessage({ type: 'check', runId, code });
    });
  }

  /** Runs one automation run in a worker; never throws (failures are results). */
  async run(request: RunRequest): Promise<RunResult> {
    const chosen = await this.pick();
    if (!chosen) return { status: 'error', error: 'sandbox failure: the sandbox is closed', cpuMs: 0, subrequests: 0, logs: '', logBytes: 0, logsTruncated: false, retryable: true };
    const runId = this.nextRunId++;
    try {
      return await new Promise<RunResult>((resolve) => {
        // The engine's interrupt handler ends every run at its limits; a worker that still does
        // not answer is replaced, and its run fails.
        const timer = setTimeout(() => {
          log.error({ runId }, 'automation sandbox worker stuck; replacing it');
          void chosen.worker.terminate();
        }, request.limits.wallMs + STUCK_MARGIN_MS);
        chosen.reserved = false;
        chosen.active.set(runId, { request, resolve, timer });
        chosen.worker.postMessage({ type: 'run', runId, code: request.code, eventJson: request.eventJson, limits: request.limits });
        chosen.worker.ref();
      });
    } finally {
      if (chosen.active.size === 0 && chosen.checks.size === 0) chosen.worker.unref();
      this.release(chosen);
    }
  }

  /** One `ctx.fetch`: the egress policy, then the private-address guard, then the request. */
  private async subrequest(request: RunRequest, rawUrl: string, rawInit: string, timeoutMs: number): Promise<FetchAnswer> {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return { error: `invalid URL ${JSON.stringify(rawUrl.slice(0, 200))}` };
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return { error: `only http and https URLs can be fetched` };
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    if (!request.allowedHosts.includes(host)) {
      return { blocked: true, error: `egress to ${host} is blocked: the project's egress policy does not name this host` };
    }
    if (net.isIP(host) && !this.opts.allowPrivate && isPrivateAddress(host)) {
      return { blocked: true, error: `egress to ${host} is blocked: a private address` };
    }
    let init: { method?: unknown; headers?: unknown; body?: unknown };
    try {
      init = JSON.parse(rawInit) ?? {};
    } catch {
      init = {};
    }
    if (init === null || typeof init !== 'object') init = {};
    const method = typeof init.method === 'string' ? init.method.toUpperCase() : 'GET';
    if (!HTTP_TOKEN.test(method)) return { error: `invalid method ${JSON.stringify(method.slice(0, 50))}` };
    const headers: Record<string, string> = {};
    if (init.headers && typeof init.headers === 'object') {
      for (const [k, v] of Object.entries(init.headers as Record<string, unknown>)) {
        const name = k.toLowerCase();
        const value = String(v);
        try {
          http.validateHeaderName(name);
          http.validateHeaderValue(name, value);
        } catch (err) {
          return { error: `invalid header ${JSON.stringify(name.slice(0, 100))}: ${(err as Error).message}` };
        }
        // Framing and routing are the sandbox's, not the code's.
        if (HOP_BY_HOP.has(name)) continue;
        headers[name] = value;
      }
    }
    const body = typeof init.body === 'string' ? Buffer.from(init.body) : null;
    if (body && body.length > MAX_SUBREQUEST_BODY_BYTES) return { error: `the subrequest body exceeds ${MAX_SUBREQUEST_BODY_BYTES} bytes` };
    if (timeoutMs <= 0) return { error: 'no time left in the run for a subrequest' };
    return new Promise((resolve) => {
      let settled = false;
      const finish = (a: FetchAnswer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(a);
      };
      const mod = url.protocol === 'https:' ? https : http;
      let req: http.ClientRequest;
      try {
        req = mod.request(url, {
          method,
          headers: { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) },
          agent: url.protocol === 'https:' ? this.httpsAgent : this.httpAgent,
        });
      } catch (err) {
        resolve({ error: `the subrequest could not be made: ${(err as Error).message}` });
        return;
      }
      const timer = setTimeout(() => {
        req.destroy();
        finish({ error: `the subrequest timed out after ${timeoutMs} ms` });
      }, timeoutMs);
      req.on('error', (err) => {
        const blocked = err instanceof BlockedAddress || (err as { cause?: unknown }).cause instanceof BlockedAddress;
        finish(blocked ? { blocked: true, error: `egress to ${host} is blocked: ${err.message}` } : { error: `the subrequest failed: ${err.message}` });
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_SUBREQUEST_RESPONSE_BYTES) {
            req.destroy();
            finish({ error: `the subrequest's response exceeds ${MAX_SUBREQUEST_RESPONSE_BYTES} bytes` });
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          const out: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
          finish({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (err) => finish({ error: `the subrequest failed: ${err.message}` }));
      });
      req.end(body ?? undefined);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiting of this.queue.splice(0)) waiting(null);
    clearInterval(this.watchdog);
    const slots = this.slots;
    this.slots = [];
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }
}
