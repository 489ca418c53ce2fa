// The benchmark harness's pure parts: its command line and how a figure is set against its baseline.
import { describe, expect, it } from 'vitest';
import { capacityMarkdown, coresFor, perEvent, predictedOnCoresLeft, predictedRate } from '../bench/capacity-model.ts';
import { cpuPerEvent } from '../bench/cpu.ts';
import type { CapacityOutput } from '../bench/load/capacity-process.ts';
import { DEFAULT_SWEEP_RATES, parseOptions, resolveRate } from '../bench/options.ts';
import { ofFloor, renderMarkdown, withRatio, type Report } from '../bench/report.ts';
import type { Result } from '../bench/scenario.ts';

describe('bench command line', () => {
  it('defaults to 10 s, 50 connections, 2 s warm-up and every scenario', () => {
    expect(parseOptions([])).toEqual({ settings: { duration: 10, connections: 50, warmup: 2 }, only: undefined, list: false, cpuProf: false, sweep: { rates: DEFAULT_SWEEP_RATES, seconds: 10 } });
  });

  it('sweeps 5, 10, 20 and 40 % of the floor by default, and takes rates in events/s or as fractions of the floor', () => {
    expect(DEFAULT_SWEEP_RATES).toEqual([{ ofFloor: 0.05 }, { ofFloor: 0.1 }, { ofFloor: 0.2 }, { ofFloor: 0.4 }]);
    expect(parseOptions(['--sweep-rates', '0.1f, .2f,400']).sweep.rates).toEqual([{ ofFloor: 0.1 }, { ofFloor: 0.2 }, { perSec: 400 }]);
    expect(resolveRate({ ofFloor: 0.1 }, 2_254), 'rounded to a whole event').toBe(225);
    expect(resolveRate({ perSec: 400 }, 2_254)).toBe(400);
    expect(() => parseOptions(['--sweep-rates', '0f'])).toThrow(/--sweep-rates/);
    expect(() => parseOptions(['--sweep-rates', '2.5f'])).toThrow(/--sweep-rates/);
    expect(() => parseOptions(['--sweep-rates', '200,abc'])).toThrow(/--sweep-rates/);
    expect(() => parseOptions(['--sweep-rates', '0'])).toThrow(/--sweep-rates/);
  });

  it('profiles the service only when asked with --cpu-prof', () => {
    expect(parseOptions(['--only', 'messages-list', '--cpu-prof'])).toMatchObject({ only: ['messages-list'], cpuProf: true });
  });

  it('reads --only, --duration and --connections', () => {
    const o = parseOptions(['--only', 'health, project-read', '--duration', '3', '--connections', '8']);
    expect(o.only).toEqual(['health', 'project-read']);
    expect(o.settings).toMatchObject({ duration: 3, connections: 8 });
  });

  it('refuses settings that are not positive integers in range', () => {
    expect(() => parseOptions(['--duration', '0'])).toThrow(/--duration/);
    expect(() => parseOptions(['--connections', '2.5'])).toThrow(/--connections/);
    expect(() => parseOptions(['--bogus'])).toThrow();
  });
});

describe('bench report', () => {
  const read: Result = { name: 'baseline:read', throughput: 2000, p50Ms: 10, p99Ms: 40 };
  const figure: Result = { name: 'project-read', throughput: 500, p50Ms: 30, p99Ms: 100, baseline: 'read', connections: 50, duration: 10 };

  it('divides throughput and p99 by the baseline’s, unless the scenario set them', () => {
    expect(withRatio(figure, read)).toMatchObject({ ratio: 0.25, p99Ratio: 2.5 });
    expect(withRatio({ ...figure, ratio: 0.9 }, read).ratio).toBe(0.9);
    expect(withRatio(figure, undefined).ratio).toBeUndefined();
  });

  it('renders every figure with its ratio, and failed scenarios with their error', () => {
    const report: Report = {
      startedAt: '2026-01-01T00:00:00.000Z',
      elapsedS: 90,
      settings: { duration: 10, connections: 50, warmup: 2 },
      machine: { cores: 2, cpu: 'cpu', memoryGb: 4, os: 'Linux', node: 'v20', postgres: '18.4 (embedded)', commit: 'abc', loadAverage: [0.1, 0.2, 0.3] },
      baselines: [read],
      scenarios: [
        { name: 'project-read', description: 'd1', status: 'ok', elapsedS: 12, results: [withRatio(figure, read)] },
        { name: 'ingest', description: 'd2', status: 'failed', error: 'timed out after 5 ms', elapsedS: 5, results: [] },
      ],
    };
    const md = renderMarkdown(report);
    expect(md).toContain('| project-read | 500 req/s |  | 30 | 100 | read | 0.25× | 2.50× |  |');
    expect(md).toContain('| baseline:read | 2,000 req/s |  | 10 | 40 |');
    expect(md).toContain('| ingest | failed | | | | | | | timed out after 5 ms |');
    expect(md).toContain('PostgreSQL 18.4 (embedded)');
    expect(md, 'no floor measured, no floor line').not.toContain('One-statement floor');
    expect(md, 'no CPU measured, no CPU section').not.toContain('## CPU per delivered event');
  });

  it('gives delivery figures as fractions of the run’s one-statement floor, and their CPU per event, service and PostgreSQL apart', () => {
    const floor: Result = { name: 'baseline:ingest', throughput: 2000, p50Ms: 20, p99Ms: 68, connections: 50, duration: 10 };
    const cpu = cpuPerEvent({ at: 0, serviceMs: 1_000, postgresMs: 5_000 }, { at: 10_000, serviceMs: 17_000, postgresMs: 25_000 }, 10_000);
    expect(cpu).toEqual({ events: 10_000, seconds: 10, serviceMsPerEvent: 1.6, postgresMsPerEvent: 2, serviceCores: 1.6, postgresCores: 2 });
    expect(cpuPerEvent({ at: 0, serviceMs: 1 }, { at: 1_000, serviceMs: 2 }, 10), 'PostgreSQL not readable: left out').toMatchObject({ serviceMsPerEvent: 0.1, postgresMsPerEvent: undefined });
    const drain: Result = { name: 'drain, defaults (maxInFlight 10)', throughput: 1500, unit: 'deliveries/s', floorRatio: ofFloor(1500, floor), p50Ms: 0, p99Ms: 0, cpu };
    expect(drain.floorRatio).toBe(0.75);
    const report: Report = {
      startedAt: '2026-01-01T00:00:00.000Z',
      elapsedS: 90,
      settings: { duration: 10, connections: 50, warmup: 2 },
      machine: { cores: 2, cpu: 'cpu', memoryGb: 4, os: 'Linux', node: 'v20', postgres: '18.4 (embedded)', commit: 'abc', loadAverage: [0.1, 0.2, 0.3] },
      baselines: [floor],
      scenarios: [{ name: 'delivery-e2e', description: 'd', status: 'ok', elapsedS: 60, results: [drain] }],
    };
    const md = renderMarkdown(report);
    expect(md).toContain('of this run: **2,000 events/s**');
    expect(md).toContain('| drain, defaults (maxInFlight 10) | 1,500 deliveries/s | 0.75× | 0 | 0 |');
    expect(md).toContain('## CPU per delivered event');
    expect(md).toContain('| drain, defaults (maxInFlight 10) | 10,000 | 10 | 1.60 | 2.00 | 3.60 | 1.60 | 2.00 |');
  });
});

describe('bench capacity model', () => {
  const out = (over: Partial<CapacityOutput>): CapacityOutput => ({
    seconds: 10,
    ingested: 2_000,
    delivered: 2_000,
    requests: 2_000,
    failures: 0,
    ingestP50Ms: 5,
    ingestP99Ms: 20,
    cpuMs: { api: 2_000, runner: 2_000, postgres: 5_000, load: 1_000 },
    walBytes: 20_000_000,
    peakConnections: 86,
    backlogAtEnd: 0,
    machineBusyCores: 2,
    ...over,
  });

  it('divides each process group’s CPU, the WAL and the connections by the delivered events', () => {
    const c = perEvent({ processes: 1, out: out({}) });
    expect(c).toMatchObject({ deliveredPerSec: 200, apiMs: 1, runnerMs: 1, postgresMs: 2.5, loadMs: 0.5, totalMs: 5, walBytes: 10_000, connectionsPerPair: 86, ownCores: 1, otherCores: 1 });
    expect(perEvent({ processes: 2, out: out({ peakConnections: 172 }) }).connectionsPerPair).toBe(86);
  });

  it('predicts cores ÷ total CPU per event, and on the cores other work left', () => {
    const c = perEvent({ processes: 1, out: out({}) });
    expect(predictedRate(c, 2)).toBe(400);
    expect(predictedOnCoresLeft(c, 2, c), 'other work took 1 of the 2 cores').toBe(200);
    expect(predictedOnCoresLeft(c, 2, perEvent({ processes: 1, out: out({ machineBusyCores: undefined }) }))).toBeUndefined();
    expect(coresFor(10_000, 2.5), 'PostgreSQL at 70 %').toBeCloseTo(35.71, 2);
  });

  it('prints the measured costs, predicted vs measured, and the sizing at 1,000, 10,000 and 50,000 deliveries/s', () => {
    const md = capacityMarkdown([{ processes: 1, out: out({}) }, { processes: 2, out: out({ delivered: 1_000, peakConnections: 172 }) }], 2);
    expect(md).toContain('| 1 + 1 | 200 | 200 | 1.000 | 1.000 | 2.500 | 0.500 | 5.000 | 10,000 | 86 | 0 |');
    expect(md).toContain('| 1 + 1 | 400 | 200 | 2.00 |');
    expect(md).toContain('| 2 + 2 | 400 | 100 | 4.00 |');
    expect(md).toContain('| 10,000 | 14.3 | 14.3 | 35.7 | 100.0 |');
    expect(md).toContain('16 cores saturates (at 70 %) at 4,480');
  });
});
