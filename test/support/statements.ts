/**
 * What `fn` sends through `target`'s query method (a pg Pool, or pg.Client.prototype for every
 * connection): statement names, or the first 40 characters of unnamed statements.
 */
export async function capturedStatements(target: object, fn: () => Promise<unknown>): Promise<string[]> {
  const t = target as { query: (...args: unknown[]) => unknown };
  const query = t.query;
  const sent: string[] = [];
  t.query = function (this: unknown, ...args: unknown[]) {
    const q = args[0] as string | { name?: string; text: string };
    sent.push(typeof q === 'string' ? q.trim().slice(0, 40) : (q.name ?? q.text.trim().slice(0, 40)));
    return query.apply(this, args);
  };
  try {
    await fn();
  } finally {
    t.query = query;
  }
  return sent;
}
