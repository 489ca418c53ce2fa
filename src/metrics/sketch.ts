/**
 * The latency sketch: a log-scale histogram (the DDSketch mapping) kept per roll-up bucket as
 * sparse counts `{"<index>": count}`. A value v ms (v ≥ 1) falls in index i = ceil(ln v / ln γ),
 * the range (γ^(i-1), γ^i]; below 1 ms, index 0. A quantile is the index where the cumulative
 * count reaches rank q·(n-1), answered as 2γ^i/(γ+1): within a relative error of (γ-1)/(γ+1)
 * (≈ 1% for γ = 1.02) of the exact order statistic. Merging buckets adds their counts, so any
 * window's percentiles come from its buckets alone, never from the raw rows.
 */
export const SKETCH_GAMMA = 1.02;
export const SKETCH_RELATIVE_ERROR = (SKETCH_GAMMA - 1) / (SKETCH_GAMMA + 1);

/** SQL for the index of `ms` (a double precision expression of milliseconds). */
export function sketchIndexSql(ms: string): string {
  return `(CASE WHEN ${ms} < 1 THEN 0 ELSE ceil(ln(${ms}) / ln(${SKETCH_GAMMA}))::int END)`;
}

export function sketchIndex(ms: number): number {
  return ms < 1 ? 0 : Math.ceil(Math.log(ms) / Math.log(SKETCH_GAMMA));
}

/** The value an index stands for (its range's midpoint in relative terms). */
export function sketchValue(index: number): number {
  if (index <= 0) return 0;
  return (2 * SKETCH_GAMMA ** index) / (SKETCH_GAMMA + 1);
}

/** Merged counts by index, sorted. */
export type Histogram = Map<number, number>;

export function mergeHistogram(into: Histogram, counts: Record<string, number | string>): Histogram {
  for (const [k, v] of Object.entries(counts)) into.set(Number(k), (into.get(Number(k)) ?? 0) + Number(v));
  return into;
}

/** The q-quantiles (0..1) of a merged histogram, in ms rounded to 0.1; null when empty. */
export function quantiles(h: Histogram, qs: number[]): (number | null)[] {
  const entries = [...h.entries()].filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]);
  const total = entries.reduce((s, [, n]) => s + n, 0);
  if (total === 0) return qs.map(() => null);
  return qs.map((q) => {
    const rank = q * (total - 1);
    let seen = 0;
    for (const [i, n] of entries) {
      seen += n;
      if (seen > rank) return Math.round(sketchValue(i) * 10) / 10;
    }
    return Math.round(sketchValue(entries[entries.length - 1][0]) * 10) / 10;
  });
}
