import { readFileSync } from 'node:fs';

/** Whether a process of this pid exists (EPERM: it does, as another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A process's start time (clock ticks after boot, Linux: so a reused pid is not taken for its
 * predecessor) and whether it has exited and waits to be reaped (a zombie); null when
 * /proc/<pid>/stat cannot be read (no such process, another OS, a hidden /proc).
 */
export function processStat(pid: number): { start: string; exited: boolean } | null {
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
