// The run's temporary directory: the embedded cluster (pg/) and the service's DATA_DIR (service/).
// Removed at exit; a run killed outright leaves it (and its cluster) to the next run to clean.
import { readFileSync, rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const PREFIX = 'bench-run-';
const OWNER_FILE = 'owner.pid';

export interface WorkDir {
  path: string;
  /** A subdirectory, created on first use. */
  sub(name: string): Promise<string>;
  remove(): Promise<void>;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readPid(file: string): number {
  try {
    return Number(readFileSync(file, 'utf8').split('\n')[0]) || 0;
  } catch {
    return 0;
  }
}

/**
 * Stops the cluster of every earlier run whose harness is gone (after checking that the pid
 * still is that cluster's postgres) and removes its directory.
 */
async function reapAbandonedRuns(log: (m: string) => void): Promise<void> {
  const entries = (await readdir(os.tmpdir())).filter((e) => e.startsWith(PREFIX)).slice(0, 100);
  for (const entry of entries) {
    const dir = path.join(os.tmpdir(), entry);
    const owner = readPid(path.join(dir, OWNER_FILE));
    if (!owner || isAlive(owner)) continue;
    const dataDir = path.join(dir, 'pg');
    const postmaster = readPid(path.join(dataDir, 'postmaster.pid'));
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${postmaster}/cmdline`, 'utf8');
    } catch {}
    if (postmaster && cmdline.includes(dataDir)) {
      log(`stopping the cluster of an abandoned run (pid ${postmaster}, ${dir})`);
      process.kill(postmaster, 'SIGINT');
      for (let i = 0; i < 100 && isAlive(postmaster); i++) await new Promise((r) => setTimeout(r, 100));
      if (isAlive(postmaster)) continue;
    }
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

export async function createWorkDir(log: (m: string) => void): Promise<WorkDir> {
  await reapAbandonedRuns(log);
  const dir = await mkdtemp(path.join(os.tmpdir(), PREFIX));
  // As root, the cluster runs as the `postgres` user, which must reach its directory.
  await chmod(dir, 0o755);
  await writeFile(path.join(dir, OWNER_FILE), String(process.pid));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return {
    path: dir,
    async sub(name) {
      const p = path.join(dir, name);
      await mkdir(p, { recursive: true });
      return p;
    },
    remove: () => rm(dir, { recursive: true, force: true }).catch(() => {}),
  };
}
