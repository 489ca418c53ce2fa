import { readFileSync, readlinkSync } from 'node:fs';

/**
 * Names the process that holds a slot lease (webhook_slot_leases.holder), so that a runner on the
 * same machine can tell that the holder is gone and take its slots back at once (sweep.ts), rather
 * than wait for the lease to run out (the webhook's timeout plus 10 s). The lease's rule is that
 * none of its requests is open once it is given up; a process that exited has none open: the
 * kernel closed its sockets.
 *
 * A holder is `<kernel boot id>/<pid namespace>/<time namespace>:<pid>:<start time>`. A pid means
 * the same process only within one boot of one kernel and one pid namespace (each container has
 * its own, and a restarted container a new one), and the start time (clock ticks since boot,
 * /proc/<pid>/stat) tells a reused pid from the holder. Off Linux (no /proc) a runner names no
 * holder, and its leases run out as before.
 */
const place = localPlace();
const self = place ? readStat(process.pid) : null;

/** This process as a lease holder, or null where it cannot be named so. */
export const LEASE_HOLDER: string | null = place && self && !self.exited ? `${place}:${process.pid}:${self.start}` : null;

/** SQL LIKE pattern of the holders of this machine (boot and pid namespace), or null. */
export const LOCAL_HOLDERS_LIKE: string | null = place && LEASE_HOLDER ? `${place}:%` : null;

/**
 * Whether `holder` names a process of this machine (boot and pid namespaces) that has exited: no
 * such pid (ESRCH), or its pid now a zombie or another process (another start time). Whatever
 * cannot be read (a /proc hidden from other users, no file descriptor left) counts as alive: a
 * live holder's lease given up would let its webhook exceed maxInFlight.
 */
export function isGoneLocalHolder(holder: string | null): boolean {
  if (!LOCAL_HOLDERS_LIKE || !holder || holder === LEASE_HOLDER) return false;
  const m = /^(.+):(\d+):(\d+)$/.exec(holder);
  if (!m || m[1] !== place) return false;
  const pid = Number(m[2]);
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists, as another user's.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return true;
  }
  const stat = readStat(pid);
  return stat !== null && (stat.exited || stat.start !== m[3]);
}

function localPlace(): string | null {
  try {
    // A /proc of another pid namespace (mounted from outside a container) would name other processes.
    if (readlinkSync('/proc/self') !== String(process.pid)) return null;
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    // "pid:[4026531836]"; start times are read through the time namespace too, where there is one.
    const ns = (kind: string) => {
      try {
        return /\d+/.exec(readlinkSync(`/proc/self/ns/${kind}`))?.[0] ?? '';
      } catch {
        return '';
      }
    };
    const pidNs = ns('pid');
    return boot && pidNs ? `${boot}/${pidNs}/${ns('time')}` : null;
  } catch {
    return null;
  }
}

/** A process's start time (clock ticks after boot) and whether it has exited (a zombie); null when it cannot be read. */
function readStat(pid: number): { start: string; exited: boolean } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const start = fields[19];
    return start ? { start, exited: fields[0] === 'Z' || fields[0] === 'X' } : null;
  } catch {
    return null;
  }
}
