import { isDatabaseUnavailable } from '../errors.ts';

export interface BatchWriterOptions<T, R> {
  /** Most items in one write. */
  maxBatch?: number;
  /** How long a batch waits for a database that is away (restarting) before its items are refused. */
  retryForMs?: number;
  /**
   * A batch the database refused (not unavailable): what each item becomes. Default: every item
   * is refused with the error. E.g. write them one by one, so one bad item loses no other.
   */
  onRefused?: (items: T[], err: unknown) => Promise<PromiseSettledResult<R>[]>;
  /**
   * How long an item that may wait (add's `wait`) lets the next ones join it before a write
   * starts when none is under way (default 0: at once). An item that may not wait starts the
   * write at once, with those gathered so far.
   */
  lingerMs?: number;
}

/**
 * Gathers items (attempt results, run records) arriving at about the same time into one write:
 * while one batch is being written the next fills up, so under load many items share a round
 * trip and alone each is written at once. While the database is away a batch waits and is written
 * when it is back (backing off from 100 ms to 1 s, for `retryForMs`). add() resolves with the
 * item's answer from `write` (one per item, in order) once its batch is written.
 */
export class BatchWriter<T, R> {
  private pending: { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }[] = [];
  private writing = false;
  private lingering: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly options: BatchWriterOptions<T, R> = {},
  ) {}

  /** `wait`: the item may wait up to lingerMs for others to share its write. */
  add(item: T, { wait = false } = {}): Promise<R> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.writing) return;
      const lingerMs = this.options.lingerMs ?? 0;
      // A full batch is written at once.
      if (wait && lingerMs > 0 && this.pending.length < (this.options.maxBatch ?? 200)) {
        this.lingering ??= setTimeout(() => void this.drain(), lingerMs);
        return;
      }
      void this.drain();
    });
  }

  private async drain() {
    if (this.lingering) clearTimeout(this.lingering);
    this.lingering = null;
    this.writing = true;
    const { maxBatch = 200, retryForMs = 30_000, onRefused } = this.options;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, maxBatch);
        const items = batch.map((p) => p.item);
        for (let delay = 100, since = Date.now(); ; delay = Math.min(delay * 2, 1_000)) {
          try {
            const answers = await this.write(items);
            batch.forEach((p, i) => p.resolve(answers[i]!));
            break;
          } catch (err) {
            if (isDatabaseUnavailable(err) && Date.now() - since < retryForMs) {
              await new Promise((r) => setTimeout(r, delay));
              continue;
            }
            const settled = onRefused ? await onRefused(items, err).catch((e: unknown) => items.map((): PromiseSettledResult<R> => ({ status: 'rejected', reason: e }))) : null;
            batch.forEach((p, i) => {
              const s = settled?.[i];
              if (s?.status === 'fulfilled') p.resolve(s.value);
              else p.reject(s ? s.reason : err);
            });
            break;
          }
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
