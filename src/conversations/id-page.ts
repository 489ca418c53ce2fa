import { InvalidRequest } from '../errors.ts';
import { parseLimit } from '../pagination/cursor.ts';

/**
 * Stripe-style list pages for the conversation part: newest first (ids sort by creation time),
 * `limit` default 10 clamped to 1..100, `starting_after=<id>` for the next page and
 * `ending_before=<id>` for the previous one. `has_more` says whether more items lie beyond the
 * page in the direction of travel.
 */
export interface IdPageRequest {
  limit?: number | null;
  starting_after?: string | null;
  ending_before?: string | null;
}

export interface IdPage<T> {
  has_more: boolean;
  data: T[];
}

export interface IdPageSource<T> {
  /** Whether the id names an item of this list's owner (the cursor must exist). */
  exists(id: string): Promise<boolean>;
  /** Up to `take` items, ordered by id in `order`, with ids strictly beyond `beyond` when given. */
  fetch(beyond: { lt?: string; gt?: string }, order: 'asc' | 'desc', take: number): Promise<T[]>;
}

export async function idPage<T extends { id: string }>(req: IdPageRequest, source: IdPageSource<T>): Promise<IdPage<T>> {
  const limit = parseLimit(req.limit ?? undefined, { def: 10, min: 1, max: 100 });
  const after = req.starting_after || undefined;
  const before = req.ending_before || undefined;
  if (after && before) throw new InvalidRequest('Give starting_after or ending_before, not both.', 'ending_before');
  const cursor = after ?? before;
  if (cursor && !(await source.exists(cursor))) {
    const param = after ? 'starting_after' : 'ending_before';
    throw new InvalidRequest(`${param} names no item of this list: ${cursor}.`, param);
  }
  if (before) {
    const rows = await source.fetch({ gt: before }, 'asc', limit + 1);
    return { has_more: rows.length > limit, data: rows.slice(0, limit).reverse() };
  }
  const rows = await source.fetch(after ? { lt: after } : {}, 'desc', limit + 1);
  return { has_more: rows.length > limit, data: rows.slice(0, limit) };
}
