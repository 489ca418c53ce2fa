// The benchmark harness's pure parts: its command line and how a figure is set against its baseline.
import { describe, expect, it } from 'vitest';
import { parseOptions } from '../bench/options.ts';
import { renderMarkdown, withRatio, type Report } from '../bench/report.ts';
import type { Result } from '../bench/scenario.ts';

describe('bench command line', () => {
  it('defaults to 10 s, 50 connections, 2 s warm-up and every scenario', () => {
    expect(parseOptions([])).toEqual({ settings: { duration: 10, connections: 50, warmup: 2 }, only: undefined, list: false, cpuProf: false, sweep: { rates: [50, 100, 200, 400, 800], seconds: 10 } });
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
    expect(md).toContain('| project-read | 500 req/s | 30 | 100 | read | 0.25× | 2.50× |  |');
    expect(md).toContain('| baseline:read | 2,000 req/s | 10 | 40 |');
    expect(md).toContain('| ingest | failed | | | | | | timed out after 5 ms |');
    expect(md).toContain('PostgreSQL 18.4 (embedded)');
  });
});
