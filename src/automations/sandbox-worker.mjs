// The Automations sandbox's worker thread (plain JavaScript: it runs in a worker_threads Worker
// without the TypeScript loader). It hosts the QuickJS engine compiled to WebAssembly
// (quickjs-emscripten) and runs one automation run per message, each in a fresh QuickJS runtime
// and context that are disposed with the run: nothing of one run survives into another. The
// runtime a run gets is made (with the bootstrap evaluated, no user code) right after the
// previous run's answer was posted, so that its creation is off the next run's path; it serves
// that one run only.
//
// User code only ever sees what is created inside its own QuickJS context: the event (parsed
// there from a JSON string), `ctx.fetch` and `console`, both thin wrappers over two host
// functions that take and return strings. No Node object, function or prototype crosses into
// the VM, so there is nothing of the host to reach or pollute. Limits per run:
// - CPU: an interrupt handler ends the run once the time spent executing VM code reaches the
//   budget (cpu_limit);
// - memory: QuickJS's own allocator limit (memory_limit), and a stack size limit;
// - subrequests: counted here before the main thread is asked to make one (subrequest_limit);
// - logs: captured up to the byte limit, then truncated (the run is not failed);
// - wall time: the whole run, subrequests included, ends at `wallMs`.
// There are no timers (no setTimeout/setInterval) and no module loader: `import` fails.
import { parentPort, workerData } from 'node:worker_threads';
import { newQuickJSWASMModule, RELEASE_SYNC } from 'quickjs-emscripten';

let QuickJS = await newQuickJSWASMModule(RELEASE_SYNC);

// Shared with the main thread's watchdog: when the VM code running now started (ms since the
// epoch; 0: none), for which run, and how much CPU budget that run had left then. Native
// built-ins (a huge Array.prototype.fill, sort) do not consult the interrupt handler; the
// watchdog ends a worker whose segment outlives its budget.
const watch = new Float64Array(workerData.watch, 0, 1);
const watchInfo = new Int32Array(workerData.watch, 8, 2);

// The bootstrap runs before the user's code and captures every built-in it relies on (JSON,
// String, Error, TypeError, Object.freeze, String.prototype.slice) in its closure: code that
// replaces a global or a prototype method afterwards (JSON.stringify = ..., Object.prototype.toJSON,
// Promise.prototype.then) changes nothing here. The result crosses as a string envelope built by
// concatenation (no object is serialised): 'd' (drop), 's' + text, or 'j' + JSON text.
// `describe` turns a thrown value into text inside the VM, so that any getter, toJSON or Proxy
// trap of the user's runs within the CPU-accounted segment (never in the host, unaccounted).
const BOOTSTRAP = `(() => {
  const hostLog = globalThis.__host_log;
  const hostFetch = globalThis.__host_fetch;
  delete globalThis.__host_log;
  delete globalThis.__host_fetch;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const Str = String;
  const Err = Error;
  const TypeErr = TypeError;
  const freeze = Object.freeze;
  const slice = Function.prototype.call.bind(String.prototype.slice);
  const MAX_ERROR = 4096;
  const show = (a) => {
    if (typeof a === 'string') return a;
    try { const s = stringify(a); return s === undefined ? Str(a) : s; } catch { return Str(a); }
  };
  const level = (name) => (...args) => { hostLog(name, args.map(show).join(' ')); };
  globalThis.console = freeze({ log: level('log'), info: level('info'), warn: level('warn'), error: level('error'), debug: level('debug') });
  const fetch = async (url, init) => {
    const answer = parse(await hostFetch(Str(url), stringify(init === undefined ? {} : init)));
    if (answer.error) throw new Err(answer.error);
    const headers = answer.headers;
    return freeze({
      status: answer.status,
      ok: answer.status >= 200 && answer.status < 300,
      headers: freeze({ get: (name) => { const v = headers[Str(name).toLowerCase()]; return v === undefined ? null : v; } }),
      text: async () => answer.body,
      json: async () => parse(answer.body),
    });
  };
  const ctx = freeze({ fetch });
  const cut = (s) => (s.length > MAX_ERROR ? slice(s, 0, MAX_ERROR) + '…' : s);
  const describe = (e) => {
    const t = typeof e;
    if (t === 'string') return cut('thrown: ' + e);
    if (t === 'symbol') return 'thrown: a symbol';
    if (e === null || (t !== 'object' && t !== 'function')) return 'thrown: ' + e;
    let name;
    let message;
    try { name = e.name; message = e.message; } catch { return 'thrown: a value that cannot be described'; }
    if (typeof name !== 'string') name = 'Error';
    if (typeof message !== 'string') {
      try { const s = stringify(e); message = typeof s === 'string' ? s : 'an object'; } catch { message = 'an object'; }
    }
    return cut(name + ': ' + message);
  };
  const drive = async (fn, eventJson) => {
    if (typeof fn !== 'function') throw new TypeErr('the module has no default export function');
    await undefined;
    const r = await fn(parse(eventJson), ctx);
    if (r === null) return 'd';
    if (r === undefined) throw new TypeErr('the default export returned undefined: return the payload to deliver, or null to drop the event');
    if (typeof r === 'string') return 's' + r;
    const s = stringify(r);
    if (typeof s !== 'string') throw new TypeErr('the result cannot be sent as JSON');
    return 'j' + s;
  };
  return freeze({ drive, describe });
})()`;

/** Ends a run from a host function: caught by no user code (the VM is interrupted at once). */
class RunLimit extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Warm-up before the first run: WebAssembly functions compile on first call, and that time must
// not be charged to a user's CPU budget.
{
  const runtime = QuickJS.newRuntime();
  const vm = runtime.newContext();
  for (let i = 0; i < 3; i++) {
    const r = vm.evalCode(`${BOOTSTRAP}; const o = JSON.parse('{"a":[1,2,3],"b":"x"}'); JSON.stringify({ ...o, c: o.a.map((x) => x * 2) });
      Promise.resolve(1).then((x) => x + 1);`);
    (r.error ?? r.value).dispose();
    const m = vm.evalCode('export default (e) => ({ ...e, n: 1 })', 'warm.js', { type: 'module' });
    (m.error ?? m.value).dispose();
    runtime.executePendingJobs(-1);
  }
  vm.dispose();
  runtime.dispose();
}

/** Size of the engine's WebAssembly memory (the main thread replaces a worker whose memory grew too much). */
function wasmBytes() {
  try {
    return QuickJS.getWasmMemory().buffer.byteLength;
  } catch {
    return 0;
  }
}

const pendingFetches = new Map();
let nextFetchId = 1;

/**
 * The runtime the next run gets: created, with the bootstrap evaluated, after the previous run's
 * result was posted (off the next run's path), and used by that one run only, then disposed.
 */
let spare = null;
/** Settles once the engine can be used (after a new engine instance replaced a broken one). */
let engineReady = Promise.resolve();
spare = prepare();

parentPort.on('message', (msg) => {
  if (msg.type === 'run') {
    const prepared = { current: null };
    const received = performance.now();
    engineReady
      .then(() => run(msg, prepared))
      .then(
        // `ms`: this worker's time for a run (the run, and making the runtime ready before it),
        // for the main thread's estimate of a queued run's wait.
        (result) => parentPort.postMessage({ type: 'result', runId: msg.runId, result, wasmBytes: wasmBytes(), ms: performance.now() - received + takeUpkeepMs() }),
        (err) => parentPort.postMessage({ type: 'result', runId: msg.runId, result: { status: 'error', error: `sandbox failure: ${err?.message ?? err}`, cpuMs: 0, subrequests: 0, logs: '', logBytes: 0, logsTruncated: false, retryable: true } }),
      )
      .then(() => {
        // After the answer: the run's runtime goes, the next one is made ready.
        const t = performance.now();
        if (prepared.current) retire(prepared.current);
        upkeepMs += performance.now() - t;
        makeSpare();
      });
  } else if (msg.type === 'check') {
    parentPort.postMessage({ type: 'checked', runId: msg.runId, problem: check(msg.code) });
  } else if (msg.type === 'fetchResult') {
    const waiting = pendingFetches.get(msg.fetchId);
    if (waiting) {
      pendingFetches.delete(msg.fetchId);
      waiting(msg.answer);
    }
  }
});

/** Compiles a module without running it: null, or why it does not compile. */
function check(code) {
  let runtime;
  let vm;
  try {
    runtime = QuickJS.newRuntime();
    runtime.setMemoryLimit(32 * 1024 * 1024);
    runtime.setMaxStackSize(512 * 1024);
    const started = performance.now();
    runtime.setInterruptHandler(() => performance.now() - started > 1000);
    vm = runtime.newContext();
    const r = vm.evalCode(code, 'automation.js', { type: 'module', compileOnly: true });
    if (r.error) {
      const text = compileErrorText(vm, r.error);
      r.error.dispose();
      // Only what the parser reports is refused here; anything else shows in the run itself.
      return /^SyntaxError: /.test(text) ? text : null;
    }
    r.value.dispose();
    return null;
  } finally {
    vm?.dispose();
    runtime?.dispose();
  }
}

/** The parser's error of a compile check (no user code ran, so reading it runs none). */
function compileErrorText(vm, handle) {
  const e = vm.dump(handle);
  if (e && typeof e === 'object') {
    const name = typeof e.name === 'string' ? e.name : 'Error';
    const message = typeof e.message === 'string' ? e.message : JSON.stringify(e);
    return `${name}: ${message}`;
  }
  return `thrown: ${typeof e === 'string' ? e : JSON.stringify(e)}`;
}

/** Largest result a run may produce (the ingest body cap). */
const MAX_RESULT_BYTES = 10 * 1024 * 1024;

/** The bootstrap's envelope ('d', 's' + text, 'j' + JSON text) as a result, or { error }. */
function decodeEnvelope(envelope) {
  const tag = envelope[0];
  const value = envelope.slice(1);
  if (tag === 'd' && value === '') return { kind: 'drop' };
  if (tag !== 's' && tag !== 'j') return { error: 'the run produced no result' };
  if (value.length > MAX_RESULT_BYTES || Buffer.byteLength(value) > MAX_RESULT_BYTES) return { error: `the result exceeds ${MAX_RESULT_BYTES} bytes` };
  if (tag === 's') return { kind: 'string', value };
  try {
    JSON.parse(value);
  } catch {
    return { error: 'the result is not valid JSON' };
  }
  return { kind: 'json', value };
}

/**
 * A fresh QuickJS runtime and context with the bootstrap evaluated (no user code has run in it).
 * The host functions call the hooks of the run that uses it (none before: they do nothing).
 */
function prepare() {
  const runtime = QuickJS.newRuntime();
  const p = { runtime, vm: null, handles: [], hooks: null, drive: null, describeFn: null };
  try {
    runtime.setMemoryLimit(32 * 1024 * 1024);
    runtime.setMaxStackSize(512 * 1024);
    const vm = (p.vm = runtime.newContext());
    const keep = (h) => {
      p.handles.push(h);
      return h;
    };
    const hostLog = keep(vm.newFunction('__host_log', (levelHandle, textHandle) => p.hooks?.log(levelHandle, textHandle)));
    const hostFetch = keep(vm.newFunction('__host_fetch', (urlHandle, initHandle) => p.hooks?.fetch(urlHandle, initHandle)));
    vm.setProp(vm.global, '__host_log', hostLog);
    vm.setProp(vm.global, '__host_fetch', hostFetch);
    const boot = keep(vm.unwrapResult(vm.evalCode(BOOTSTRAP, 'bootstrap.js')));
    // Read before any user code runs: plain own properties of a frozen object of the bootstrap's.
    p.drive = keep(vm.getProp(boot, 'drive'));
    p.describeFn = keep(vm.getProp(boot, 'describe'));
    return p;
  } catch (err) {
    retire(p);
    throw err;
  }
}

/** Disposes of a run's runtime; one that cannot be torn down cleanly makes a new engine instance replace this one. */
function retire(p) {
  try {
    for (const h of p.handles.reverse()) if (h.alive) h.dispose();
    p.vm?.dispose();
    p.runtime.dispose();
  } catch {
    spare = null;
    engineReady = newQuickJSWASMModule(RELEASE_SYNC).then((m) => {
      QuickJS = m;
    });
  }
}

/** Time spent disposing of runtimes and making the next ready since the last answer (ms). */
let upkeepMs = 0;
function takeUpkeepMs() {
  const ms = upkeepMs;
  upkeepMs = 0;
  return ms;
}

function makeSpare() {
  if (spare) return;
  void engineReady.then(() => {
    if (spare) return;
    const t = performance.now();
    try {
      spare = prepare();
    } catch {
      // The next run prepares its own (and reports the failure).
    }
    upkeepMs += performance.now() - t;
  });
}

async function run({ runId, code, eventJson, limits }, prepared) {
  const started = performance.now();
  const wallDeadline = started + limits.wallMs;
  let cpuMs = 0;
  let segmentStart = 0;
  let inSegment = false;
  let limit = null; // { status, message } once a limit ended the run
  let subrequests = 0;
  let retryable = false;
  let logs = '';
  let logBytes = 0;
  let logsTruncated = false;
  const fetchWaits = new Set();

  const p = spare ?? prepare();
  spare = null;
  prepared.current = p;
  const { runtime, vm } = p;
  runtime.setMemoryLimit(limits.memoryBytes);
  runtime.setMaxStackSize(limits.stackBytes);
  const usedCpu = () => cpuMs + (inSegment ? performance.now() - segmentStart : 0);
  runtime.setInterruptHandler(() => {
    if (limit) return true;
    if (usedCpu() >= limits.cpuMs) {
      limit = { status: 'cpu_limit', message: `the run used more than its ${limits.cpuMs} ms of CPU` };
      return true;
    }
    if (performance.now() >= wallDeadline) {
      limit = { status: 'cpu_limit', message: `the run took longer than its ${limits.wallMs} ms` };
      return true;
    }
    return false;
  });
  const handles = p.handles;
  const keep = (h) => {
    handles.push(h);
    return h;
  };
  // Runs VM code, counting its time against the CPU budget.
  const segment = (fn) => {
    segmentStart = performance.now();
    inSegment = true;
    watchInfo[0] = runId;
    watchInfo[1] = Math.max(0, Math.ceil(limits.cpuMs - cpuMs));
    watch[0] = Date.now();
    try {
      return fn();
    } finally {
      watch[0] = 0;
      cpuMs += performance.now() - segmentStart;
      inSegment = false;
    }
  };
  const finish = (status, extra) => ({
    status,
    cpuMs: Math.round(cpuMs * 1000) / 1000,
    subrequests,
    logs,
    logBytes,
    logsTruncated,
    retryable,
    ...extra,
  });

  const describeFn = p.describeFn;
  /**
   * A thrown value as text (and disposes of its handle): described inside the VM, within the
   * CPU-accounted segment (a getter, toJSON or Proxy trap of the code's is interrupted at the
   * limit); the host never dumps a value of the code's.
   */
  function describe(handle) {
    let text = 'thrown: a value that cannot be described';
    try {
      const r = segment(() => vm.callFunction(describeFn, vm.undefined, handle));
      if (r.error) r.error.dispose();
      else {
        if (vm.typeof(r.value) === 'string') text = vm.getString(r.value);
        r.value.dispose();
      }
    } finally {
      if (handle.alive) handle.dispose();
    }
    return text;
  }
  /** A failed run from a thrown value: a limit reached meanwhile wins; an out-of-memory error is memory_limit. */
  function failedWith(handle) {
    const text = describe(handle);
    if (limit) return finish(limit.status, { error: limit.message });
    if (/out of memory/i.test(text)) return finish('memory_limit', { error: 'the run ran out of memory' });
    return finish('error', { error: text });
  }
  try {
    p.hooks = {
      log: (levelHandle, textHandle) => {
        const line = `${vm.getString(levelHandle) === 'log' ? '' : `[${vm.getString(levelHandle)}] `}${vm.getString(textHandle)}\n`;
        if (logsTruncated) return;
        const bytes = Buffer.byteLength(line);
        if (logBytes + bytes > limits.logBytes) {
          // Whole characters only, up to the limit; then a marker. The run goes on.
          const room = limits.logBytes - logBytes;
          const part = Buffer.from(line).subarray(0, Math.max(room, 0)).toString('utf8').replace(/\uFFFD$/, '');
          logs += part;
          logBytes += Buffer.byteLength(part);
          logsTruncated = true;
          return;
        }
        logs += line;
        logBytes += bytes;
      },
      fetch: (urlHandle, initHandle) => {
        const url = vm.getString(urlHandle);
        const init = vm.getString(initHandle);
        subrequests += 1;
        if (subrequests > limits.subrequests) {
          limit = { status: 'subrequest_limit', message: `the run made more than its ${limits.subrequests} subrequests` };
          throw new RunLimit('subrequest_limit', limit.message);
        }
        const deferred = vm.newPromise();
        const fetchId = nextFetchId++;
        const remaining = Math.max(0, Math.floor(wallDeadline - performance.now()));
        const wait = new Promise((resolve) => pendingFetches.set(fetchId, resolve)).then((answer) => {
          fetchWaits.delete(wait);
          if (!deferred.alive) return;
          if (answer.blocked) {
            limit = limit ?? { status: 'egress_blocked', message: answer.error };
          } else if (answer.error) {
            retryable = true;
          }
          const text = vm.newString(JSON.stringify(answer));
          deferred.resolve(text);
          text.dispose();
        });
        fetchWaits.add(wait);
        parentPort.postMessage({ type: 'fetch', runId, fetchId, url, init, timeoutMs: Math.min(limits.subrequestTimeoutMs, remaining) });
        handles.push(deferred);
        return deferred.handle;
      },
    };
    const drive = p.drive;
    const evaluated = segment(() => vm.evalCode(code, 'automation.js', { type: 'module' }));
    if (evaluated.error) return failedWith(evaluated.error);
    if (limit) return finish(limit.status, { error: limit.message });
    let ns = keep(evaluated.value);
    // A module with top-level await evaluates to a promise of its namespace.
    if (!vm.getPromiseState(ns).notAPromise) {
      const settled = await settle(ns);
      if (settled.done) return settled.done;
      ns = settled.value;
    }
    // The namespace's `default` is a binding of the module (no getter of the code's).
    const fn = keep(vm.getProp(ns, 'default'));
    const eventHandle = keep(vm.newString(eventJson));
    const called = segment(() => vm.callFunction(drive, vm.undefined, fn, eventHandle));
    if (called.error) return failedWith(called.error);
    if (limit) return finish(limit.status, { error: limit.message });
    const promise = keep(called.value);
    const settled = await settle(promise);
    if (settled.done) return settled.done;
    const envelope = vm.typeof(settled.value) === 'string' ? vm.getString(settled.value) : null;
    const result = envelope === null ? null : decodeEnvelope(envelope);
    if (result === null) return finish('error', { error: 'the run produced no result' });
    if (result.error) return finish('error', { error: result.error });
    return finish('ok', { result });
  } catch (err) {
    if (err instanceof RunLimit) return finish(err.status, { error: err.message });
    if (limit) return finish(limit.status, { error: limit.message });
    // The engine itself failed (not the code): the attempt is retried.
    retryable = true;
    return finish('error', { error: `sandbox failure: ${err?.message ?? err}` });
  } finally {
    // The runtime is disposed of after the result is posted (retire), and never used again.
    p.hooks = null;
  }

  /**
   * Drives a VM promise to its end: runs pending jobs (inside the CPU budget), waits for
   * subrequests, and stops at a limit, a rejection or when nothing is left that could settle it.
   */
  async function settle(promiseHandle) {
    for (;;) {
      if (limit) return { done: finish(limit.status, { error: limit.message }) };
      const state = vm.getPromiseState(promiseHandle);
      if (state.type === 'fulfilled') {
        if (state.notAPromise) return { value: promiseHandle };
        return { value: keep(state.value) };
      }
      if (state.type === 'rejected') return { done: failedWith(state.error) };
      if (runtime.hasPendingJob()) {
        const jobs = segment(() => runtime.executePendingJobs(-1));
        if (jobs.error) return { done: failedWith(jobs.error) };
        continue;
      }
      if (fetchWaits.size > 0) {
        const left = wallDeadline - performance.now();
        if (left <= 0) {
          limit = { status: 'cpu_limit', message: `the run took longer than its ${limits.wallMs} ms` };
          continue;
        }
        let timer;
        await Promise.race([...fetchWaits, new Promise((r) => (timer = setTimeout(r, left)))]);
        clearTimeout(timer);
        continue;
      }
      return { done: finish('error', { error: 'the result never settles (a promise that nothing resolves; there are no timers)' }) };
    }
  }
}
