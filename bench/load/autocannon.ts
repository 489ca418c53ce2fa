// The harness side of an autocannon run: always in a separate process (bench/load/autocannon-process.ts).
import { runLoadProcess } from '../processes.ts';
import type { AutocannonOptions, LoadFigures, LoadSettings } from '../scenario.ts';
import type { AutocannonInput, AutocannonOutput } from './autocannon-process.ts';

const SCRIPT = 'bench/load/autocannon-process.ts';

export async function runAutocannon(
  options: AutocannonOptions & { url: string },
  defaults: LoadSettings,
  signal?: AbortSignal,
): Promise<LoadFigures> {
  const settings: LoadSettings = {
    connections: options.connections ?? defaults.connections,
    duration: options.duration ?? defaults.duration,
    warmup: options.warmup ?? defaults.warmup,
  };
  if (!options.path && !options.requests?.length) throw new Error('autocannon: give `path` or `requests`');
  const input: AutocannonInput = {
    url: options.url,
    method: options.method,
    path: options.path ?? '/',
    headers: options.headers,
    body: options.body,
    requests: options.requests,
    ...(options.idReplacement ? { idReplacement: true } : {}),
    ...settings,
  };
  const out = await runLoadProcess<AutocannonOutput>(SCRIPT, input, {
    timeoutMs: (settings.warmup + settings.duration) * 1000 + 30_000,
    signal,
    label: `autocannon ${options.method ?? 'GET'} ${options.path ?? options.requests?.[0]?.path}`,
  });
  const failures = out.non2xx + out.errors;
  const maxRatio = options.maxFailureRatio ?? 0.01;
  if (out.requests === 0) throw new Error(`no request completed (${out.errors} errors, ${out.timeouts} timeouts)`);
  if (failures > maxRatio * out.requests) {
    throw new Error(`${failures} of ${out.requests} requests failed (${out.non2xx} non-2xx, ${out.errors} socket errors, ${out.timeouts} timeouts)`);
  }
  return {
    throughput: out.requests / out.elapsed,
    unit: 'req/s',
    p50Ms: out.p50Ms,
    p99Ms: out.p99Ms,
    connections: settings.connections,
    duration: settings.duration,
    requests: out.requests,
    failures,
  };
}
