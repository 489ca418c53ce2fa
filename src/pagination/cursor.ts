import { createHmac } from 'node:crypto';
import { InvalidCursor, InvalidLimit } from '../errors.ts';
import { config } from '../config.ts';
import { constantTimeEqual, derivedKey } from '../encryption.ts';

let key: Buffer | undefined;
function cursorKey(): Buffer {
  return (key ??= config.CURSOR_SECRET ? Buffer.from(config.CURSOR_SECRET) : derivedKey('cursor'));
}

/**
 * The one pagination helper for the event part's cursor lists: `limit` (default 20,
 * clamped to 1..100, non-integer 400) and opaque, signed cursors bound to the exact
 * list and filter set they were issued for (anything else is 400 invalid_cursor).
 * REST pages and GraphQL's Relay connections both read a list through it, with the
 * same cursors: a REST page is `limit` + `cursor`; a connection may also bound the
 * page by `before` and take it from the end (`last`).
 */
export interface PageRequest {
  limit?: unknown;
  /** The page starts after this cursor's item: the previous page's `nextCursor` (Relay's `after`). */
  cursor?: unknown;
  /** The page ends before this cursor's item (Relay's `before`). */
  before?: unknown;
  /** The page is the `limit` items nearest its end rather than its start (Relay's `last`). */
  fromEnd?: boolean;
}

export interface Page<T> {
  items: T[];
  /** The cursor to pass for the page after this one; null on the last page. */
  nextCursor: string | null;
  /** The cursor of `items[index]` (a Relay edge's cursor): the page after it starts there. */
  cursorAt(index: number): string;
  /** Whether items lie before the first item and after the last one (Relay's pageInfo; as the spec allows, `false` when not known cheaply). */
  hasPreviousPage: boolean;
  hasNextPage: boolean;
}

/** Exclusive bounds on a list's key. */
export interface KeyRange<K> {
  gt?: K;
  lt?: K;
}

/** One cursor list: what its cursors are bound to, its order, and how to read a slice of it. */
export interface CursorList<T, K = string> {
  /** Names the list and its owner (e.g. `webhooks:prj_…`). */
  scope: string;
  /** The request's filters, canonical: a cursor is valid only with the same ones. */
  filters: unknown;
  /** The list's order by its key. */
  order: 'asc' | 'desc';
  /** Up to `take` rows whose key lies in `range`, ordered by key in `order` (the list's order, or its reverse). */
  fetch(range: KeyRange<K>, order: 'asc' | 'desc', take: number): Promise<T[]>;
  /** A row's position in its cursor (default its `id`). */
  positionOf?(row: T): string;
  /** The key a position stands for (default the position itself). */
  keyOf?(position: string): K;
  limits?: { def?: number; max?: number };
}

export function parseLimit(raw: unknown, { def = 20, min = 1, max = 100 } = {}): number {
  if (raw === undefined || raw === null || raw === '') return def;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^[-+]?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!Number.isInteger(n)) throw new InvalidLimit();
  return Math.min(max, Math.max(min, n));
}

function canonical(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(',')}}`;
}

function sign(data: string): string {
  return createHmac('sha256', cursorKey()).update(data).digest('base64url').slice(0, 22);
}

/** `scope` names the list and its owner (e.g. `webhooks:prj_…`); `filters` are the request's filters. */
export function encodeCursor(scope: string, filters: unknown, position: string): string {
  const body = Buffer.from(JSON.stringify({ p: position })).toString('base64url');
  return `${body}.${sign(`${scope}|${canonical(filters)}|${body}`)}`;
}

export function decodeCursor(cursor: unknown, scope: string, filters: unknown): string | undefined {
  if (cursor === undefined || cursor === null || cursor === '') return undefined;
  if (typeof cursor !== 'string') throw new InvalidCursor();
  const [body, mac, extra] = cursor.split('.');
  if (!body || !mac || extra !== undefined) throw new InvalidCursor();
  if (!constantTimeEqual(mac, sign(`${scope}|${canonical(filters)}|${body}`))) throw new InvalidCursor();
  try {
    const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')).p;
    if (typeof p !== 'string') throw new Error();
    return p;
  } catch {
    throw new InvalidCursor();
  }
}

/** Reads one page of a keyset list (see PageRequest and CursorList). */
export async function paginate<T, K = string>(req: PageRequest, list: CursorList<T, K>): Promise<Page<T>> {
  const limit = parseLimit(req.limit, list.limits);
  const after = decodeCursor(req.cursor, list.scope, list.filters);
  const before = decodeCursor(req.before, list.scope, list.filters);
  const keyOf = list.keyOf ?? ((position: string) => position as K);
  const ascending = list.order === 'asc';
  const range: KeyRange<K> = {};
  if (after !== undefined) range[ascending ? 'gt' : 'lt'] = keyOf(after);
  if (before !== undefined) range[ascending ? 'lt' : 'gt'] = keyOf(before);
  const fromEnd = req.fromEnd === true;
  const reversed = ascending ? 'desc' : 'asc';
  const rows = await list.fetch(range, fromEnd ? reversed : list.order, limit + 1);
  const more = rows.length > limit;
  const items = rows.slice(0, limit);
  if (fromEnd) items.reverse();
  const positionOf = list.positionOf ?? ((row: T) => (row as { id: string }).id);
  const cursorAt = (index: number) => encodeCursor(list.scope, list.filters, positionOf(items[index]));
  const hasNextPage = fromEnd ? before !== undefined : more;
  return {
    items,
    nextCursor: hasNextPage && items.length > 0 ? cursorAt(items.length - 1) : null,
    cursorAt,
    hasPreviousPage: fromEnd ? more : after !== undefined,
    hasNextPage,
  };
}
