// `npm run bench -- [--only a,b] [--duration S] [--connections N] [--warmup S] [--list] [--cpu-prof]`
import { parseArgs } from 'node:util';
import type { LoadSettings } from './scenario.ts';

export interface BenchOptions {
  settings: LoadSettings;
  only?: string[];
  list: boolean;
  /** Run the service with `node --cpu-prof`, the profile written to bench/results/profiles/ when it stops. */
  cpuProf: boolean;
  /** steady-sweep: its rates (events/s) and seconds per rate. */
  sweep: SweepSettings;
}

export interface SweepSettings {
  rates: number[];
  seconds: number;
}

export const USAGE = `usage: npm run bench -- [options]
  --only a,b         run only these scenarios (the two baselines always run)
  --duration S       measured seconds per figure (default 10)
  --connections N    concurrent connections (default 50)
  --warmup S         unmeasured seconds of load before each figure (default 2)
  --sweep-seconds S  steady-sweep: seconds per rate (default 10; fewer for quick iteration)
  --sweep-rates a,b  steady-sweep: the rates in events/s (default 50,100,200,400,800)
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
    },
  });
  const rates = values['sweep-rates']?.split(',').map((r) => integer('sweep-rates', r.trim(), 0, 1, 5000)) ?? [50, 100, 200, 400, 800];
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
  };
}
