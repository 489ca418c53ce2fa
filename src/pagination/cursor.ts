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
 */
export interface PageRequest {
  limit?: unknown;
  cursor?: unknown;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
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

/**
 * Runs one keyset page: `fetch(afterPosition, take)` must return rows in list order,
 * strictly after the position; `positionOf` gives a row's position (usually its id).
 */
export async function paginate<T>(
  req: PageRequest,
  scope: string,
  filters: unknown,
  fetch: (after: string | undefined, take: number) => Promise<T[]>,
  positionOf: (row: T) => string = (row) => (row as { id: string }).id,
  limitOptions?: { def?: number; max?: number },
): Promise<Page<T>> {
  const limit = parseLimit(req.limit, limitOptions);
  const after = decodeCursor(req.cursor, scope, filters);
  const rows = await fetch(after, limit + 1);
  const items = rows.slice(0, limit);
  const nextCursor = rows.length > limit ? encodeCursor(scope, filters, positionOf(items[items.length - 1])) : null;
  return { items, nextCursor };
}
