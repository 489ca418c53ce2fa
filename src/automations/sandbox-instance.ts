import type { Runtime } from '../runtime.ts';
import { Sandbox } from './sandbox.ts';

let shared: Sandbox | null = null;

/**
 * This process's sandbox (its worker threads start on first use; idle, they keep no process
 * alive). Every runner and API handler of the process shares it.
 */
export function sandboxOf(rt: Pick<Runtime, 'config'>): Sandbox {
  if (!shared) shared = new Sandbox({ workers: rt.config.AUTOMATION_SANDBOX_WORKERS, allowPrivate: rt.config.ALLOW_PRIVATE_DESTINATIONS });
  return shared;
}

/** Stops the sandbox's workers (shutdown). */
export async function closeSandbox(): Promise<void> {
  const s = shared;
  shared = null;
  await s?.close();
}
