import { readFileSync, readlinkSync } from 'node:fs';
import { isAlive, processStat } from '../process-identity.ts';

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
const self = place ? processStat(process.pid) : null;

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
  if (!isAlive(pid)) return true;
  const stat = processStat(pid);
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
