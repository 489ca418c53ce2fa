// What the scenarios that compare two sides in alternated rounds (ingest-quota-cost,
// ingest-provider-cost) share: the rounds' length, their summary, and management calls.
import type { AutocannonOptions, LoadFigures, LoadSettings, Result, ScenarioContext } from './scenario.ts';

/** Each run: 40 % of the run's measured seconds (at least 2) after at most 1 s of warm-up, so a scenario stays under two minutes. */
export function runSettings(s: LoadSettings): Pick<LoadSettings, 'duration' | 'warmup'> {
  return { duration: Math.max(2, Math.round(s.duration * 0.4)), warmup: Math.min(s.warmup, 1) };
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export const percent = (n: number) => `${(n * 100).toFixed(1)} %`;

/** Median throughput, p50 and p99 of one side's runs. */
export function summary(name: string, runs: LoadFigures[]): Result {
  return {
    name,
    throughput: median(runs.map((r) => r.throughput)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    connections: runs[0].connections,
    duration: runs[0].duration,
    requests: runs.reduce((n, r) => n + r.requests, 0),
    failures: runs.reduce((n, r) => n + r.failures, 0),
  };
}

/** One management call with the project's key (JSON in and out). */
export async function managementCall(serviceUrl: string, apiKey: string, method: string, path: string, body?: unknown, timeoutMs = 10_000) {
  const res = await fetch(`${serviceUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the bench reads a few fields of answers it created
  return { status: res.status, body: (await res.json()) as any };
}

/**
 * `rounds` rounds of one autocannon run per side, the sides' order alternating from round to
 * round (so neither always runs on a warmer machine); each side's runs in order. Throws when the
 * run was interrupted before every round ran.
 */
export async function alternateRounds<S extends string>(ctx: ScenarioContext, requests: Record<S, AutocannonOptions>, sides: [S, S], rounds: number): Promise<Record<S, LoadFigures[]>> {
  const runs = { [sides[0]]: [], [sides[1]]: [] } as unknown as Record<S, LoadFigures[]>;
  for (let round = 0; round < rounds && !ctx.signal.aborted; round++) {
    const order = round % 2 === 0 ? sides : ([sides[1], sides[0]] as const);
    for (const side of order) {
      const figures = await ctx.autocannon({ ...requests[side], ...runSettings(ctx.settings) });
      runs[side].push(figures);
      ctx.log(`round ${round + 1}/${rounds}, ${side}: ${Math.round(figures.throughput)} req/s, p50 ${figures.p50Ms} ms, p99 ${figures.p99Ms} ms`);
    }
  }
  if (runs[sides[0]].length < rounds || runs[sides[1]].length < rounds) throw new Error('interrupted before every round ran');
  return runs;
}
