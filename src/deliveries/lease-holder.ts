import { readFileSync, readlinkSync } from 'node:fs';

/**
 * Names the process that holds a slot lease (webhook_slot_leases.holder), so that a runner on the
 * same machine can tell that the holder is gone and take its slots back at once (sweep.ts), rather
 * than wait for the lease to run out (the webhook's timeout plus 10 s). The lease's rule is that
 * none of its requests is open once it is given up; a process that exited has none open: the
 * kernel closed its sockets.
 *
 * A holder is `<kernel boot id>/<pid namespace>:<pid>:<start time>`. A pid means the same process
 * only within one boot of one kernel and one pid namespace (containers on one host have their
 * own), and the start time (clock ticks since boot, /proc/<pid>/stat) tells a reused pid from the
 * holder. Off Linux (no /proc) a runner names no holder, and its leases run out as before.
 */
const place = localPlace();
const self = place ? startTime(process.pid) : null;

/** This process as a lease holder, or null where it cannot be named so. */
export const LEASE_HOLDER: string | null = place && self ? `${place}:${process.pid}:${self}` : null;

/** SQL LIKE pattern of the holders of this machine (boot and pid namespace), or null. */
export const LOCAL_HOLDERS_LIKE: string | null = place ? `${place}:%` : null;

/** Whether `holder` names a process of this machine (boot and pid namespace) that has exited. */
export function isGoneLocalHolder(holder: string | null): boolean {
  if (!place || !holder) return false;
  const m = /^(.+):(\d+):(\d+)$/.exec(holder);
  if (!m || m[1] !== place) return false;
  return startTime(Number(m[2])) !== m[3];
}

function localPlace(): string | null {
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    // "pid:[4026531836]"
    const ns = /\d+/.exec(readlinkSync('/proc/self/ns/pid'))?.[0];
    return boot && ns ? `${boot}/${ns}` : null;
  } catch {
    return null;
  }
}

/** A live process's start time (clock ticks after boot); null when there is no such process or it has exited (a zombie). */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}
