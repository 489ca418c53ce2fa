// Load process: one autocannon warm-up run, then the measured run. Started by bench/load/autocannon.ts.
import autocannon from 'autocannon';
import type { HttpRequestSpec } from '../scenario.ts';
import { serveLoadProcess } from './protocol.ts';

export interface AutocannonInput extends HttpRequestSpec {
  url: string;
  connections: number;
  duration: number;
  warmup: number;
  requests?: HttpRequestSpec[];
  idReplacement?: boolean;
}

export interface AutocannonOutput {
  requests: number;
  /** Seconds the measured run actually took. */
  elapsed: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

function options(input: AutocannonInput, duration: number): autocannon.Options {
  return {
    url: input.url,
    connections: input.connections,
    duration,
    method: input.method ?? 'GET',
    headers: input.headers,
    body: input.body,
    requests: input.requests?.map((r) => ({ method: r.method ?? 'GET', path: r.path, headers: r.headers, body: r.body })),
    ...(input.requests ? {} : { path: input.path }),
    timeout: 10,
    ...(input.idReplacement ? { idReplacement: true } : {}),
  } as autocannon.Options;
}

serveLoadProcess<AutocannonInput, AutocannonOutput>(async (input) => {
  const url = new URL(input.path, input.url);
  // The single-request form takes the whole URL; `requests` are resolved against the base.
  const base = input.requests ? input.url : url.toString();
  if (input.warmup > 0) await autocannon(options({ ...input, url: base }, input.warmup));
  const r = await autocannon(options({ ...input, url: base }, input.duration));
  return {
    requests: r.requests.total,
    elapsed: r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
  };
});
