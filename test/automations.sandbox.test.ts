import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, type RunLimits, type RunRequest } from '../src/automations/sandbox.ts';
import { startReceiver } from './support/receiver.ts';

// The sandbox itself (worker threads + QuickJS), with the Starter tier's per-run limits but
// Business's CPU (1 s), so that a contended machine does not turn the other limits' cases into
// cpu_limit; the CPU limit's own cases set theirs.
const LIMITS: RunLimits = { cpuMs: 1_000, memoryBytes: 32 * 1024 * 1024, stackBytes: 512 * 1024, subrequests: 5, logBytes: 16 * 1024, wallMs: 10_000, subrequestTimeoutMs: 5_000 };
const EVENT = JSON.stringify({ id: 'evt_1', receivedAt: '2026-11-24T00:00:00.000Z', channel: 'http', method: 'POST', path: '/', query: {}, headers: {}, contentType: 'application/json', body: { type: 'charge.succeeded', amount: 42 } });

let sandbox: Sandbox;
let strict: Sandbox;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const run = (code: string, extra: Partial<RunRequest> = {}, sb = sandbox) => sb.run({ code, eventJson: EVENT, limits: LIMITS, allowedHosts: [], ...extra });

beforeAll(async () => {
  sandbox = new Sandbox({ workers: 2, allowPrivate: true });
  strict = new Sandbox({ workers: 1, allowPrivate: false });
  receiver = await startReceiver((r) => ({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ path: r.url }) }));
  await run('export default () => 1'); // workers up
});
afterAll(async () => {
  await sandbox?.close();
  await strict?.close();
  await receiver?.close();
});

/** Runs `fn` while counting the ticks of a 5 ms timer on this thread (none while the thread is held). */
async function ticksWhile<T>(fn: () => Promise<T>): Promise<{ value: T; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  try {
    const value = await fn();
    return { value, ticks };
  } finally {
    clearInterval(timer);
  }
}

describe('automations sandbox: results', () => {
  it('a transform, an async transform, a string, drop, throw, undefined', async () => {
    const t = await run('export default (event) => ({ text: `${event.body.type}: ${event.body.amount}`, id: event.id })');
    expect(t.status).toBe('ok');
    expect(t.result).toEqual({ kind: 'json', value: JSON.stringify({ text: 'charge.succeeded: 42', id: 'evt_1' }) });
    const a = await run('export default async (event) => { await Promise.resolve(); return [event.body.amount * 2]; }');
    expect(a.result).toEqual({ kind: 'json', value: '[84]' });
    expect((await run('export default () => "plain text"')).result).toEqual({ kind: 'string', value: 'plain text' });
    expect((await run('export default () => null')).result).toEqual({ kind: 'drop' });
    const thrown = await run('export default () => { throw new Error("boom") }');
    expect(thrown).toMatchObject({ status: 'error', error: 'Error: boom', retryable: false });
    expect((await run('export default () => undefined')).status).toBe('error');
    expect((await run('export default 42')).error).toMatch(/no default export function/);
    expect((await run('export default () => new Promise(() => {})')).error).toMatch(/never settles/);
  });

  it('Date.now and Math.random are available; console output is captured', async () => {
    const r = await run('export default () => { console.log("hello", { a: 1 }); console.error("bad"); return { now: Date.now() > 0, rnd: typeof Math.random() }; }');
    expect(r.result).toEqual({ kind: 'json', value: '{"now":true,"rnd":"number"}' });
    expect(r.logs).toBe('hello {"a":1}\n[error] bad\n');
  });
});

describe('automations sandbox: limits', () => {
  it('an infinite loop ends at its CPU budget (not the wall-time limit), without holding this thread', async () => {
    // How close to the budget it ends is measured in automations.sandbox.timing.test.ts.
    const limits = { ...LIMITS, cpuMs: 1_000 };
    const { value: r, ticks } = await ticksWhile(() => run('export default () => { while (true) {} }', { limits }));
    expect(r).toMatchObject({ status: 'cpu_limit', error: 'the run used more than its 1000 ms of CPU', retryable: false });
    expect(r.cpuMs).toBeGreaterThanOrEqual(limits.cpuMs);
    const starter = await run('export default () => { while (true) {} }', { limits: { ...LIMITS, cpuMs: 100 } });
    expect(starter).toMatchObject({ status: 'cpu_limit', error: 'the run used more than its 100 ms of CPU' });
    expect(starter.cpuMs).toBeGreaterThanOrEqual(100);
    // The loop ran in a worker thread: this thread's timer kept firing during the second it ran
    // (on the loop's thread it would not have fired at all until the run ended).
    expect(ticks).toBeGreaterThan(10);
  });

  it('while(true) inside a promise, and in a then callback, ends too', async () => {
    const limits = { ...LIMITS, cpuMs: 100 };
    expect((await run('export default () => new Promise(() => { while (true) {} })', { limits })).status).toBe('cpu_limit');
    expect((await run('export default async () => { await null; for (;;) {} }', { limits })).status).toBe('cpu_limit');
    expect((await run('await new Promise(() => { while (true) {} }); export default () => 1', { limits })).status).toBe('cpu_limit');
  });

  it('a memory bomb ends memory_limit; the process and the next run are unharmed', async () => {
    const rss = process.memoryUsage().rss;
    for (const bomb of ['new Uint8Array(256 * 1024 * 1024)', '"x".repeat(64 * 1024 * 1024)', 'new ArrayBuffer(40 * 1024 * 1024)']) {
      const r = await run(`export default () => { const big = ${bomb}; return big.length }`);
      expect(r.status, bomb).toBe('memory_limit');
    }
    // A gradual bomb: the engine's allocator refuses past the limit; when QuickJS's collector
    // thrashes near it (inside native code the interrupt handler cannot reach), the watchdog
    // ends the run at its CPU budget instead. Either way a limit ends it: memory, or the CPU
    // budget (never the 10 s wall-time limit).
    const gradual = await run('export default async () => { await null; const keep = []; for (;;) keep.push(new Uint8Array(1 << 20)); }');
    if (gradual.status === 'cpu_limit') expect(gradual.error).toBe(`the run used more than its ${LIMITS.cpuMs} ms of CPU`);
    else expect(gradual.status).toBe('memory_limit');
    expect((await run('export default () => ({ fine: true })')).result).toEqual({ kind: 'json', value: '{"fine":true}' });
    expect(process.memoryUsage().rss - rss).toBeLessThan(512 * 1024 * 1024);
  });

  it('1 MB of logs is truncated at the per-run limit; the run is not failed', async () => {
    const r = await run('export default () => { console.log("y".repeat(1024 * 1024)); console.log("after"); return "done" }');
    expect(r.status).toBe('ok');
    expect(r.result).toEqual({ kind: 'string', value: 'done' });
    expect(r.logsTruncated).toBe(true);
    expect(r.logBytes).toBe(LIMITS.logBytes);
    expect(Buffer.byteLength(r.logs)).toBe(LIMITS.logBytes);
  });

  it('100 subrequests end subrequest_limit after the tier allows 5', async () => {
    const before = receiver.received.length;
    const r = await run(
      `export default async (e, ctx) => { for (let i = 0; i < 100; i++) await ctx.fetch("${receiver.url}/n" + i); return 1 }`,
      { allowedHosts: ['127.0.0.1'] },
    );
    expect(r.status).toBe('subrequest_limit');
    expect(r.subrequests).toBe(LIMITS.subrequests + 1);
    expect(receiver.received.length - before).toBe(LIMITS.subrequests);
    // Catching the refusal does not get the code past it.
    const caught = await run(`export default async (e, ctx) => { for (let i = 0; i < 100; i++) { try { await ctx.fetch("${receiver.url}/c") } catch {} } return 1 }`, { allowedHosts: ['127.0.0.1'] });
    expect(caught.status).toBe('subrequest_limit');
  });

  it('an allowed subrequest: status, headers, json', async () => {
    const r = await run(`export default async (e, ctx) => { const res = await ctx.fetch("${receiver.url}/enrich?x=1", { method: "POST", body: "{}" }); return { s: res.status, ok: res.ok, ct: res.headers.get("Content-Type"), body: await res.json() } }`, {
      allowedHosts: ['127.0.0.1'],
    });
    expect(r.status).toBe('ok');
    expect(JSON.parse((r.result as { value: string }).value)).toEqual({ s: 200, ok: true, ct: 'application/json', body: { path: '/enrich?x=1' } });
    expect(r.subrequests).toBe(1);
  });

  it('egress to a host not on the policy, and to 127.0.0.1 through the private-address guard, ends egress_blocked', async () => {
    const notAllowed = await run('export default async (e, ctx) => { try { await ctx.fetch("https://example.com/") } catch {} return 1 }', { allowedHosts: ['api.example.org'] });
    expect(notAllowed.status).toBe('egress_blocked');
    expect(notAllowed.error).toMatch(/example\.com/);
    const before = receiver.received.length;
    // Even named on the policy, a private address is refused (deployments that do not allow private destinations).
    const loopback = await run(`export default async (e, ctx) => { await ctx.fetch("${receiver.url}/x"); return 1 }`, { allowedHosts: ['127.0.0.1'] }, strict);
    expect(loopback.status).toBe('egress_blocked');
    const named = await run(`export default async (e, ctx) => { await ctx.fetch("http://localhost:${new URL(receiver.url).port}/x"); return 1 }`, { allowedHosts: ['localhost'] }, strict);
    expect(named.status).toBe('egress_blocked');
    expect(receiver.received.length).toBe(before);
  });

  it('a failed subrequest is retryable; a thrown error is not', async () => {
    const r = await run('export default async (e, ctx) => { await ctx.fetch("http://127.0.0.1:1/"); return 1 }', { allowedHosts: ['127.0.0.1'] });
    expect(r).toMatchObject({ status: 'error', retryable: true });
  });
});

describe('automations sandbox: isolation', () => {
  it('no process, require, import of host modules, timers or host globals', async () => {
    const r = await run(`export default () => ({
      process: typeof process, require: typeof require, setTimeout: typeof setTimeout, setInterval: typeof setInterval,
      fetch: typeof fetch, Buffer: typeof Buffer, hostFetch: typeof __host_fetch, hostLog: typeof __host_log,
      escaped: (() => { try { return typeof ({}).constructor.constructor('return process')() } catch (e) { return String(e) } })(),
      escapedGlobal: (() => { try { return typeof Function('return this')().process } catch (e) { return 'threw' } })(),
    })`);
    expect(JSON.parse((r.result as { value: string }).value)).toEqual({
      process: 'undefined', require: 'undefined', setTimeout: 'undefined', setInterval: 'undefined', fetch: 'undefined', Buffer: 'undefined',
      hostFetch: 'undefined', hostLog: 'undefined', escaped: "ReferenceError: 'process' is not defined", escapedGlobal: 'undefined',
    });
    expect((await run('import fs from "fs"; export default () => fs')).error).toMatch(/could not load module/);
    expect((await run('import("node:fs"); export default () => 1')).status).toBe('ok');
    const dyn = await run('export default async () => { const m = await import("node:child_process"); return typeof m }');
    expect(dyn.status).toBe('error');
    expect((await run('export default (e, ctx) => ctx.constructor.constructor("return process")()')).status).toBe('error');
  });

  it('prototype pollution stays inside the run: not the host, not the next run', async () => {
    const polluted = await run(`export default (e, ctx) => {
      Object.prototype.polluted = 'yes'; Array.prototype.push = () => 0; JSON.parse = () => ({ hacked: true });
      ctx.fetch.__proto__.polluted = 'yes'; e.__proto__.polluted = 'yes'; globalThis.leak = 'from run 1';
      return { ok: true };
    }`);
    expect(polluted.status).toBe('ok');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.parse('{"a":1}')).toEqual({ a: 1 });
    const next = await run('export default () => ({ polluted: ({}).polluted ?? null, leak: globalThis.leak ?? null, push: [1].push(2) })');
    expect(JSON.parse((next.result as { value: string }).value)).toEqual({ polluted: null, leak: null, push: 2 });
  });

  it('a compile check reports syntax errors without running the code', async () => {
    expect(await sandbox.check('export default () => 1')).toBeNull();
    expect(await sandbox.check('export default () => {')).toMatch(/SyntaxError/);
    expect(await sandbox.check('while (true) {} export default 1')).toBeNull();
  });
});

describe('automations sandbox: hostile code (security review)', () => {
  it('a bad header name, header value or method fails the fetch, not the process', async () => {
    const allowed = { allowedHosts: ['127.0.0.1'] };
    const before = receiver.received.length;
    for (const init of ['{ headers: { "a b": "x" } }', '{ headers: { "x-a": "1\\r\\nx-b: 2" } }', '{ method: "GE T" }', '{ method: "GET\\n" }']) {
      const r = await run(`export default async (e, ctx) => { try { await ctx.fetch("${receiver.url}/bad", ${init}); return "sent" } catch (err) { return String(err.message) } }`, allowed);
      expect(r.status, init).toBe('ok');
      expect((r.result as { value: string }).value, init).toMatch(/invalid|header|method/i);
    }
    expect(receiver.received.length).toBe(before);
    // Hop-by-hop headers set by the code are dropped; the request still goes out.
    const ok = await run(`export default async (e, ctx) => (await ctx.fetch("${receiver.url}/hop", { method: "POST", body: "abc", headers: { host: "evil", "content-length": "999", "transfer-encoding": "chunked", connection: "close", "x-ok": "1" } })).status`, allowed);
    expect(ok.status).toBe('ok');
    expect((ok.result as { value: string }).value).toBe('200');
    const got = receiver.received.at(-1)!;
    expect(got.headers['x-ok']).toBe('1');
    expect(got.headers.host).not.toBe('evil');
    expect(got.headers['content-length']).toBe('3');
  });

  it('overriding JSON.stringify, Promise or Object.prototype.toJSON cannot forge the result envelope', async () => {
    const forged = await run(`export default () => { JSON.stringify = () => '{"kind":"json","value":{"length":5}}'; return { a: 1 } }`);
    expect(forged).toMatchObject({ status: 'ok', result: { kind: 'json', value: '{"a":1}' } });
    const toJson = await run(`export default () => { Object.prototype.toJSON = function () { return { kind: 'json', value: { length: 1e9 } } }; return null }`);
    expect(toJson).toMatchObject({ status: 'ok', result: { kind: 'drop' } });
    const promise = await run(`export default () => { Promise.prototype.then = function () { return 1 }; globalThis.Promise = function () {}; return "s" }`);
    expect(promise).toMatchObject({ status: 'ok', result: { kind: 'string', value: 's' } });
    // A result beyond the 10 MB cap is the run's error (never a huge buffer on the service's thread).
    const huge = await run('export default () => "x".repeat(10 * 1024 * 1024 + 1)', { limits: { ...LIMITS, memoryBytes: 96 * 1024 * 1024 } });
    expect(huge).toMatchObject({ status: 'error', retryable: false });
    expect(huge.error).toMatch(/exceeds/);
    for (const r of [forged, toJson, promise]) expect(typeof (r.result as { value?: unknown }).value === 'string' || r.result?.kind === 'drop').toBe(true);
  });

  it('a thrown value with a looping toJSON, getter or Proxy ends at the CPU budget (not the wall-time limit), or is an error', async () => {
    const limits = { ...LIMITS, cpuMs: 50 };
    for (const code of [
      'export default () => { throw { toJSON() { for (;;) {} } } }',
      'export default () => { throw { get message() { for (;;) {} }, get name() { for (;;) {} } } }',
      'export default () => { throw new Proxy({}, { get() { for (;;) {} }, getOwnPropertyDescriptor() { for (;;) {} }, getPrototypeOf() { for (;;) {} } }) }',
      'throw { toJSON() { for (;;) {} } }; export default () => 1',
      'export default async () => { await null; throw { toJSON() { for (;;) {} } } }',
    ]) {
      const r = await run(code, { limits });
      expect(['cpu_limit', 'error'], code).toContain(r.status);
      if (r.status === 'cpu_limit') expect(r.error, code).toBe('the run used more than its 50 ms of CPU');
      expect(r.retryable, code).toBe(false);
    }
  });

  it('throwing a promise, a symbol or null is an error of the code, not a retryable sandbox failure', async () => {
    for (const code of ['export default () => { throw Promise.resolve(1) }', 'export default async () => { throw Promise.resolve(1) }', 'export default () => { throw Symbol("s") }', 'export default () => { throw null }', 'throw Promise.resolve(1); export default () => 1']) {
      const r = await run(code);
      expect(r.status, code).toBe('error');
      expect(r.retryable, code).toBe(false);
      expect(r.error, code).not.toMatch(/sandbox failure/);
    }
    expect((await run('export default () => { throw new TypeError("nope") }')).error).toBe('TypeError: nope');
  });
});

describe('automations sandbox: one run per worker', () => {
  it('runs beyond the pool wait for a free worker (never share one); a worker whose memory grew is replaced', async () => {
    const one = new Sandbox({ workers: 1, allowPrivate: true, recycleWasmBytes: 1 });
    try {
      const limits = { ...LIMITS, cpuMs: 150 };
      const runs = [0, 1, 2].map(() => one.run({ code: 'export default () => { for (;;) {} }', eventJson: EVENT, limits, allowedHosts: [] }));
      await new Promise((r) => setTimeout(r, 0));
      expect(one.stats()).toMatchObject({ workers: 1, running: 1, queued: 2 });
      expect(one.saturated()).toBe(true);
      const results = await Promise.all(runs);
      // Each run had the worker alone: each reached its own CPU limit (none failed with another's).
      for (const r of results) expect(r.status).toBe('cpu_limit');
      expect(one.stats().recycled).toBeGreaterThanOrEqual(1);
      const after = await one.run({ code: 'export default () => "still fine"', eventJson: EVENT, limits: LIMITS, allowedHosts: [] });
      expect(after.result).toEqual({ kind: 'string', value: 'still fine' });
      expect(one.stats()).toMatchObject({ running: 0, queued: 0 });
    } finally {
      await one.close();
    }
  });
});
