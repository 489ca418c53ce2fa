import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase, type Database } from '../src/db/client.ts';
import { createTestDatabase } from './support/database.ts';

let db: Database;
beforeAll(async () => {
  db = connectDatabase(await createTestDatabase(), 2);
});
afterAll(async () => {
  await db?.close();
});

describe('timestamp columns', () => {
  it('read as UTC wall time, exactly as Date parses the ISO form, for every shape PostgreSQL prints', async () => {
    const values = [
      '2026-11-21 21:10:59.123',
      '2026-11-21 21:10:59',
      '2026-11-21 21:10:59.1',
      '2026-11-21 21:10:59.12',
      '2026-11-21 21:10:59.123456',
      '2026-11-21 21:10:59.999999',
      '2024-02-29 23:59:59.5',
      '1970-01-01 00:00:00',
      '1969-12-31 23:59:59.999',
      '0099-06-01 12:00:00',
      '0001-01-01 00:00:00 BC',
      '12026-01-01 00:00:00',
      'infinity',
      '-infinity',
    ];
    const { rows } = await db.pool.query<{ t: Date; text: string }>(
      `SELECT v::timestamp AS t, v::timestamp::text AS text FROM unnest($1::text[]) WITH ORDINALITY AS x(v, n) ORDER BY n`,
      [values],
    );
    expect(rows).toHaveLength(values.length);
    for (const { t, text } of rows) {
      const expected = new Date(`${text.replace(' ', 'T')}Z`).getTime();
      expect(t).toBeInstanceOf(Date);
      expect({ text, time: t.getTime() }).toEqual({ text, time: expected });
    }
    expect(rows[0].t.toISOString()).toBe('2026-11-21T21:10:59.123Z');
    expect(rows[4].t.toISOString()).toBe('2026-11-21T21:10:59.123Z');
  });
});
