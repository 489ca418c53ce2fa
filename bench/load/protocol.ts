// The child side of runLoadProcess (bench/processes.ts): one input in, one result out, exit.

export type LoadProcessAnswer<T> = { ok: true; result: T } | { ok: false; error: string };

/**
 * Makes this script a load process: waits for its input on the IPC channel, runs `work`,
 * sends back the result (or the error) and exits.
 */
export function serveLoadProcess<I, O>(work: (input: I) => Promise<O>): void {
  if (!process.send) throw new Error('a load process must be started by the bench harness (no IPC channel)');
  process.once('message', (input: I) => {
    work(input).then(
      (result) => reply({ ok: true, result }),
      (err: unknown) => reply({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
    );
  });
}

function reply<T>(answer: LoadProcessAnswer<T>) {
  process.send!(answer, () => process.exit(0));
}
