import { Cron } from 'croner';
import { InvalidRequest } from '../errors.ts';

/**
 * Cron expressions and their next run, by croner: five fields (minute first) or six (seconds
 * first), read in an IANA time zone. Daylight-saving transitions are croner's: a local time that
 * does not exist on a spring-forward day fires at the same offset after the jump (02:30 → 03:30),
 * and one that occurs twice on a fall-back day fires once. A schedule ticks at most once a second
 * (croner's finest field).
 */

/** 400 `param: "timezone"` unless `zone` is an IANA time zone this runtime knows. */
export function assertTimeZone(zone: unknown): string {
  if (typeof zone !== 'string' || zone.trim() === '' || zone.length > 100) throw new InvalidRequest('timezone must be an IANA time zone name, e.g. Europe/Berlin.', 'timezone');
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
  } catch {
    throw new InvalidRequest(`Unknown time zone: ${zone}.`, 'timezone');
  }
  return zone;
}

function cronOf(expression: string, timezone: string): Cron {
  return new Cron(expression, { timezone, paused: true, legacyMode: true });
}

/**
 * 400 `param: "cron"` unless `expression` is five or six cron fields croner accepts and that fire
 * at least once (`0 0 30 2 *` never does). Returns it trimmed, with single spaces.
 */
export function assertCron(expression: unknown, timezone: string): string {
  if (typeof expression !== 'string') throw new InvalidRequest('cron is required: five fields, or six with seconds first.', 'cron');
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) throw new InvalidRequest('cron must have five fields, or six with seconds first.', 'cron');
  const normalized = fields.join(' ');
  let cron: Cron;
  try {
    cron = cronOf(normalized, timezone);
  } catch (e) {
    throw new InvalidRequest(`Invalid cron expression: ${(e as Error).message.replace(/^CronPattern: /, '')}.`, 'cron');
  }
  if (!cron.nextRun()) throw new InvalidRequest('The cron expression never fires.', 'cron');
  return normalized;
}

/** The first tick strictly after `after` (null: none, which assertCron keeps from being stored). */
export function nextTick(expression: string, timezone: string, after: Date): Date | null {
  return cronOf(expression, timezone).nextRun(after);
}
