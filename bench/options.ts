// `npm run bench -- [--only a,b] [--duration S] [--connections N] [--warmup S] [--list] [--cpu-prof] [--sweep-seconds S] [--sweep-rates a,b] [--burst-events N]`
import { parseArgs } from 'node:util';
import type { LoadSettings } from './scenario.ts';

export interface BenchOptions {
  settings: LoadSettings;
  only?: string[];
  list: boolean;
  /** Run the service with `node --cpu-prof`, the profile written to bench/results/profiles/ when it stops. */
  cpuProf: boolean;
  /** steady-sweep: its rates (events/s, or fractions of the run's floor) and seconds per rate. */
  sweep: SweepSettings;
  /** delivery-e2e and steady-sweep: events per burst instead of each scenario's own (quick iteration). */
  burstEvents?: number;
}

/** A steady rate: in events/s (`400`), or as a fraction of the run's one-statement floor (`0.2f`). */
export type SweepRate = { perSec: number } | { ofFloor: number };

export interface SweepSettings {
  rates: SweepRate[];
  seconds: number;
}

/** 5, 10, 20 and 40 % of the floor: the targets (issue 29) are at 10 and 20 %. */
export const DEFAULT_SWEEP_RATES: SweepRate[] = [{ ofFloor: 0.05 }, { ofFloor: 0.1 }, { ofFloor: 0.2 }, { ofFloor: 0.4 }];

/** The rate in events/s: a fraction of the floor rounded to a whole event. */
export function resolveRate(rate: SweepRate, floorPerSec: number): number {
  return 'perSec' in rate ? rate.perSec : Math.max(1, Math.round(rate.ofFloor * floorPerSec));
}

/** `0.2f` or `400`, as on the command line. */
export function formatRate(rate: SweepRate): string {
  return 'perSec' in rate ? String(rate.perSec) : `${rate.ofFloor}f`;
}

function sweepRate(value: string): SweepRate {
  if (/^(\d+(\.\d*)?|\.\d+)f$/.test(value)) {
    const ofFloor = Number(value.slice(0, -1));
    if (ofFloor > 0 && ofFloor <= 2) return { ofFloor };
  } else if (/^\d+$/.test(value)) {
    const perSec = Number(value);
    if (perSec >= 1 && perSec <= 5000) return { perSec };
  }
  throw new Error(`--sweep-rates: "${value}" is neither a rate from 1 to 5000 events/s nor a fraction of the floor from 0 to 2 followed by f (0.2f)`);
}

export const USAGE = `usage: npm run bench -- [options]
  --only a,b         run only these scenarios (the three baselines always run)
  --duration S       measured seconds per figure (default 10)
  --connections N    concurrent connections (default 50)
  --warmup S         unmeasured seconds of load before each figure (default 2)
  --sweep-seconds S  steady-sweep: seconds per rate (default 10; fewer for quick iteration)
  --sweep-rates a,b  steady-sweep: the rates, in events/s (400) or as fractions of the run's one-statement
                     floor, baseline:ingest (0.2f); default 0.05f,0.1f,0.2f,0.4f
  --burst-events N   delivery-e2e and steady-sweep: events per burst (default: 20,000 and 13,000; fewer for
                     quick iteration)
  --list             list the scenarios and exit
  --cpu-prof         profile the service (node --cpu-prof) over the whole run; summarise with
                     npx tsx bench/profile-top.ts bench/results/profiles/<file>.cpuprofile
DATABASE_URL: use this PostgreSQL server (a fresh database is created and dropped); otherwise an embedded one.
`;

function integer(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}`);
  return n;
}

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      only: { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      warmup: { type: 'string' },
      list: { type: 'boolean', default: false },
      'cpu-prof': { type: 'boolean', default: false },
      'sweep-seconds': { type: 'string' },
      'sweep-rates': { type: 'string' },
      'burst-events': { type: 'string' },
    },
  });
  const rates = values['sweep-rates']?.split(',').map((r) => sweepRate(r.trim())) ?? DEFAULT_SWEEP_RATES;
  if (rates.length === 0) throw new Error('--sweep-rates needs at least one rate');
  const only = values.only?.split(',').map((s) => s.trim()).filter(Boolean);
  return {
    settings: {
      duration: integer('duration', values.duration, 10, 1, 600),
      connections: integer('connections', values.connections, 50, 1, 1000),
      warmup: integer('warmup', values.warmup, 2, 0, 60),
    },
    only: only?.length ? only : undefined,
    list: values.list ?? false,
    cpuProf: values['cpu-prof'] ?? false,
    sweep: { rates, seconds: integer('sweep-seconds', values['sweep-seconds'], 10, 1, 120) },
    ...(values['burst-events'] === undefined ? {} : { burstEvents: integer('burst-events', values['burst-events'], 0, 100, 200_000) }),
  };
}
