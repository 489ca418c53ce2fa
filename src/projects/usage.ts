import { InvalidRequest } from '../errors.ts';
import type { Runtime } from '../runtime.ts';

type Rt = Pick<Runtime, 'db'>;

/** Current usage, keyed like the quotas it is measured against. */
export interface ProjectUsage {
  /** UTC month the delivery count belongs to, e.g. "2026-11". */
  month: string;
  monthly_deliveries: number;
  stored_payload_bytes: number;
  file_storage_bytes: number;
  backlog_depth: number;
  /** Replays and re-drives in the last 24 hours. */
  replay_volume: number;
}

/** Usage of a project, or of one webhook of it (`webhookId`). */
export async function readUsage(rt: Rt, projectId: string, webhookId = ''): Promise<ProjectUsage> {
  const { rows } = await rt.db.pool.query({
    name: 'read_usage',
    text: `WITH t AS (
             SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AS month,
                    to_char(date_trunc('hour', now() AT TIME ZONE 'UTC') - interval '23 hours', 'YYYY-MM-DD"T"HH24') AS replay_from
           )
           SELECT t.month, c.metric, coalesce(sum(c.value), 0)::bigint AS value
           FROM t LEFT JOIN usage_counters c ON c.project_id = $1 AND c.webhook_id = $2 AND (
                (c.metric = 'deliveries' AND c.period = t.month)
             OR (c.metric IN ('stored_payload_bytes', 'file_storage_bytes', 'backlog_depth') AND c.period = 'current')
             OR (c.metric = 'replays' AND c.period >= t.replay_from))
           GROUP BY t.month, c.metric`,
    values: [projectId, webhookId],
  });
  const of = (metric: string) => Number(rows.find((r) => r.metric === metric)?.value ?? 0);
  return {
    month: rows[0]?.month,
    monthly_deliveries: webhookId ? 0 : of('deliveries'),
    stored_payload_bytes: of('stored_payload_bytes'),
    file_storage_bytes: of('file_storage_bytes'),
    backlog_depth: of('backlog_depth'),
    replay_volume: of('replays'),
  };
}

export interface UsageDay {
  date: string;
  deliveries: number;
  replays: number;
}
export interface UsageMonth {
  month: string;
  deliveries: number;
  replays: number;
}
export interface UsageReport {
  from: Date;
  to: Date;
  days: UsageDay[];
  months: UsageMonth[];
  totals: { deliveries: number; replays: number };
}

const DAY_MS = 86_400_000;
export const MAX_USAGE_RANGE_DAYS = 400;
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

function parseTimestamp(raw: unknown, param: string): Date {
  if (typeof raw !== 'string' || !ISO_TIMESTAMP.test(raw.trim())) {
    throw new InvalidRequest(`${param} must be an ISO 8601 timestamp, e.g. 2026-11-01T00:00:00Z.`, param);
  }
  const s = raw.trim();
  // A date or a time without an offset is read as UTC, like every timestamp of the API.
  const d = new Date(s.length === 10 ? `${s}T00:00:00Z` : /Z|[+-]\d{2}:?\d{2}$/.test(s) ? s : `${s}Z`);
  if (Number.isNaN(d.getTime())) throw new InvalidRequest(`${param} is not a valid timestamp.`, param);
  return d;
}

/**
 * Usage between two instants, by UTC day and month: deliveries created (ingest and replays) and
 * replays. Counters are kept per day, so each day that overlaps [from, to) is reported whole.
 */
export async function usageReport(rt: Rt, projectId: string, rawFrom: unknown, rawTo: unknown): Promise<UsageReport> {
  if (rawFrom === undefined || rawFrom === null || rawFrom === '') throw new InvalidRequest('from is required.', 'from');
  if (rawTo === undefined || rawTo === null || rawTo === '') throw new InvalidRequest('to is required.', 'to');
  const from = parseTimestamp(rawFrom, 'from');
  const to = parseTimestamp(rawTo, 'to');
  if (from.getTime() >= to.getTime()) throw new InvalidRequest('from must be before to.', 'to');
  if (to.getTime() - from.getTime() > MAX_USAGE_RANGE_DAYS * DAY_MS) {
    throw new InvalidRequest(`The range may span at most ${MAX_USAGE_RANGE_DAYS} days.`, 'to');
  }
  const firstDay = new Date(Math.floor(from.getTime() / DAY_MS) * DAY_MS);
  const lastDay = new Date(Math.ceil(to.getTime() / DAY_MS) * DAY_MS - DAY_MS);
  const dayKey = (d: Date) => d.toISOString().slice(0, 10);
  const { rows } = await rt.db.pool.query(
    `SELECT metric, left(period, 10) AS day, sum(value)::bigint AS value FROM usage_counters
     WHERE project_id = $1 AND webhook_id = ''
       AND ((metric = 'deliveries' AND period >= $2 AND period <= $3 AND length(period) = 10)
         OR (metric = 'replays' AND period >= $2 AND period < $3 || 'U'))
     GROUP BY 1, 2`,
    [projectId, dayKey(firstDay), dayKey(lastDay)],
  );
  const byDay = new Map<string, UsageDay>();
  for (let t = firstDay.getTime(); t <= lastDay.getTime(); t += DAY_MS) {
    const date = dayKey(new Date(t));
    byDay.set(date, { date, deliveries: 0, replays: 0 });
  }
  for (const r of rows) {
    const day = byDay.get(r.day);
    if (!day) continue;
    if (r.metric === 'deliveries') day.deliveries += Number(r.value);
    else day.replays += Number(r.value);
  }
  const days = [...byDay.values()];
  const months = new Map<string, UsageMonth>();
  for (const d of days) {
    const month = d.date.slice(0, 7);
    const m = months.get(month) ?? { month, deliveries: 0, replays: 0 };
    m.deliveries += d.deliveries;
    m.replays += d.replays;
    months.set(month, m);
  }
  const totals = days.reduce((s, d) => ({ deliveries: s.deliveries + d.deliveries, replays: s.replays + d.replays }), { deliveries: 0, replays: 0 });
  return { from, to, days, months: [...months.values()], totals };
}
