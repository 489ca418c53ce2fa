// CPU time of the service's processes and of PostgreSQL's, read from /proc before and after a
// phase: CPU ms per delivered event, the service and PostgreSQL apart. Linux only; elsewhere (or
// when PostgreSQL runs on another host) the figures are left out, never guessed.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

/** What to measure: the service's processes (API, job runner) and the PostgreSQL cluster's postmaster. */
export interface CpuTargets {
  service: number[];
  /** The cluster's postmaster: it and all its children (backends, WAL writer, checkpointer, autovacuum…). */
  postmaster?: number;
}

/** CPU time used so far, in ms; undefined when it could not be read. */
export interface CpuSample {
  at: number;
  serviceMs?: number;
  postgresMs?: number;
}

/** CPU over a phase, per delivered event. */
export interface CpuPerEvent {
  events: number;
  seconds: number;
  serviceMsPerEvent?: number;
  postgresMsPerEvent?: number;
  /** Average cores busy over the phase. */
  serviceCores?: number;
  postgresCores?: number;
}

let tickMs: number | undefined;
/** ms per clock tick (`getconf CLK_TCK`, usually 100 ticks a second). */
function msPerTick(): number {
  if (tickMs === undefined) {
    let hz = 100;
    try {
      const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim());
      if (Number.isInteger(n) && n > 0) hz = n;
    } catch {
      // getconf missing: Linux's usual 100
    }
    tickMs = 1000 / hz;
  }
  return tickMs;
}

interface Stat {
  comm: string;
  ppid: number;
  /** utime + stime of the process (all its threads). */
  own: number;
  /** cutime + cstime: its children that exited and were waited for. */
  children: number;
}

/** /proc/<pid>/stat; the command may hold spaces and parentheses, so fields are counted from the last ')'. */
function readStat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const f = text.slice(close + 2).split(' ');
    // After the command: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
    return { comm: text.slice(text.indexOf('(') + 1, close), ppid: Number(f[1]), own: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/**
 * The postmaster of the cluster serving `databaseUrl`, when it runs on this machine: the parent
 * of this connection's backend (pg_backend_pid). Undefined when /proc does not show it (another
 * host, another pid namespace, not Linux).
 */
export async function findPostmaster(databaseUrl: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const backend = readStat(rows[0].pid);
    const postmaster = backend && readStat(backend.ppid);
    return backend && postmaster && /postgres/.test(backend.comm) && /postgres/.test(postmaster.comm) ? backend.ppid : undefined;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * The cluster's CPU so far: the postmaster's own and its exited children's time, plus every live
 * child's. A backend that exits during a phase moves from the second sum to the first, so the
 * difference of two samples counts it whole.
 */
function postgresTicks(postmaster: number): number | undefined {
  const root = readStat(postmaster);
  if (!root) return undefined;
  let ticks = root.own + root.children;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(Number(name));
    if (s?.ppid === postmaster) ticks += s.own;
  }
  return ticks;
}

function serviceTicks(pids: number[]): number | undefined {
  let ticks = 0;
  for (const pid of pids) {
    const s = readStat(pid);
    if (!s) return undefined;
    ticks += s.own + s.children;
  }
  return pids.length ? ticks : undefined;
}

export function sampleCpu(targets: CpuTargets | undefined): CpuSample {
  const at = performance.now();
  if (!targets) return { at };
  const t = msPerTick();
  const service = serviceTicks(targets.service);
  const postgres = targets.postmaster ? postgresTicks(targets.postmaster) : undefined;
  return { at, serviceMs: service === undefined ? undefined : service * t, postgresMs: postgres === undefined ? undefined : postgres * t };
}

/** CPU between two samples per delivered event; a side that could not be read is left out. */
export function cpuPerEvent(before: CpuSample, after: CpuSample, events: number): CpuPerEvent {
  const seconds = (after.at - before.at) / 1000;
  const round = (n: number) => Math.round(n * 1000) / 1000;
  const per = (a?: number, b?: number) => (a === undefined || b === undefined || events <= 0 ? undefined : round((b - a) / events));
  const cores = (a?: number, b?: number) => (a === undefined || b === undefined || seconds <= 0 ? undefined : Math.round(((b - a) / 1000 / seconds) * 100) / 100);
  return {
    events,
    seconds: Math.round(seconds * 10) / 10,
    serviceMsPerEvent: per(before.serviceMs, after.serviceMs),
    postgresMsPerEvent: per(before.postgresMs, after.postgresMs),
    serviceCores: cores(before.serviceMs, after.serviceMs),
    postgresCores: cores(before.postgresMs, after.postgresMs),
  };
}

const fmt = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(2));

/** "service 1.62, PostgreSQL 2.10 CPU ms per event" */
export function describeCpu(c: CpuPerEvent | undefined): string {
  if (!c) return '';
  return `CPU per delivered event: service ${fmt(c.serviceMsPerEvent)} ms, PostgreSQL ${fmt(c.postgresMsPerEvent)} ms (${c.events} events in ${c.seconds} s)`;
}
