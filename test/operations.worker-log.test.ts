import { expect, it } from 'vitest';
import { workerLogger } from '../src/db/migrate.ts';

// graphile-worker's warnings and errors reach our log; once the process is stopping (Ctrl-C on
// npm start also stops its embedded PostgreSQL under the runner), they are the stop's, told at info.
it("logs graphile-worker's errors and warnings as such, and at info once the process is stopping", () => {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (obj: object, msg: string) => lines.push({ level, obj: obj as Record<string, unknown>, msg });
  let stopping = false;
  const logger = workerLogger({ info: at('info'), warn: at('warn'), error: at('error') }, () => stopping);
  logger.error('Error occurred attempting to UNLISTEN', { code: '57P01' });
  logger.warn('a connection was lost');
  logger.info('not ours to log');
  stopping = true;
  logger.error('Error occurred attempting to UNLISTEN', { code: '57P01' });
  logger.warn('a connection was lost');
  expect(lines).toEqual([
    { level: 'error', obj: expect.objectContaining({ code: '57P01' }), msg: 'Error occurred attempting to UNLISTEN' },
    { level: 'warn', obj: expect.any(Object), msg: 'a connection was lost' },
    { level: 'info', obj: expect.objectContaining({ code: '57P01', workerLevel: 'error' }), msg: 'Error occurred attempting to UNLISTEN (while stopping)' },
    { level: 'info', obj: expect.objectContaining({ workerLevel: 'warning' }), msg: 'a connection was lost (while stopping)' },
  ]);
});
