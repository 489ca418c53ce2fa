import type pg from 'pg';
import { WebhookPaused } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { acceptEvent, type AcceptedEvent, type Admission } from './accept-event.ts';
import type { InboundEvent, IngestChannel } from './inbound-event.ts';

/** The header naming the schedule a cron event came from, in the event's (routing) headers. */
export const SCHEDULE_ID_HEADER = 'x-schedule-id';
/** The tick's planned time (ISO 8601), one per tick: consumers may use schedule id + tick as an idempotency key. */
export const SCHEDULE_TICK_HEADER = 'x-schedule-tick';

/** What the cron channel needs of a schedule to turn one tick into an event. */
export interface CronTick {
  scheduleId: string;
  /** The webhook's publicId (acceptEvent's lookup key). */
  publicId: string;
  /** Any JSON; a string is sent as is. */
  payload: unknown;
  contentType: string;
  headers: Record<string, string>;
  /** The tick's planned time (a manual trigger: now). */
  tickAt: Date;
}

/**
 * A tick as an InboundEvent: body = the payload (a string as is, anything else as JSON), the
 * schedule's headers (lower-case names, as every channel gives them) with the content type,
 * `x-schedule-id` and `x-schedule-tick`.
 */
export function cronEvent(tick: CronTick): InboundEvent {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(tick.headers)) headers[name.toLowerCase()] = value;
  headers['content-type'] = tick.contentType;
  headers[SCHEDULE_ID_HEADER] = tick.scheduleId;
  headers[SCHEDULE_TICK_HEADER] = tick.tickAt.toISOString();
  const body = typeof tick.payload === 'string' ? Buffer.from(tick.payload) : Buffer.from(JSON.stringify(tick.payload ?? {}));
  return { channel: 'cron', method: 'POST', path: '/', query: {}, headers, contentType: tick.contentType, body };
}

/**
 * Schedules are the service's own, trusted producer: no secret is checked. State still applies
 * (a paused webhook refuses with 409 webhook_paused, an archived one is 404 in acceptEvent), and
 * the webhook's default delay, as for every channel.
 */
const admitCron: Admission = (target) => {
  if (target.status === 'paused') throw new WebhookPaused();
  return target.defaultDelaySeconds ? new Date(Date.now() + target.defaultDelaySeconds * 1000) : null;
};

/**
 * The cron channel: one tick of a schedule through acceptEvent (routing, transform, the quotas
 * other than the ingest rate, the one durable statement). With `client`, the event is stored in
 * the caller's transaction, which fires the tick and plans the next one together.
 */
export function acceptCronTick(rt: Runtime, tick: CronTick, client?: pg.PoolClient): Promise<AcceptedEvent> {
  return acceptEvent(rt, tick.publicId, cronEvent(tick), admitCron, client);
}

/** The cron channel: schedules' ticks (schedules/tick.ts calls cronEvent in its own transaction); nothing to mount. */
export const cronChannel: IngestChannel = { name: 'cron' };
