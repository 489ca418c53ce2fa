import type { QuotaName } from '../../errors.ts';
import type { Runtime } from '../../runtime.ts';
import { enforcing, HEADROOM_REQUESTS, headroom as headroomOf, RecentReadings, overageActive, projectQuotas, webhookOverrides, webhookQuotas, type ProjectQuotaSource, type WebhookQuotaSource } from './limits.ts';

type UsageRow = { metric: string; webhook: boolean; value: string };

/** A process's last reading of the usage the hint compares, by project and webhook. */
const readings = new RecentReadings<UsageRow[]>();

/**
 * Which stored-amount or monthly quota would refuse an ingest now, if any, read without counting
 * anything: for a channel that must answer before it has the event (SMTP answers each RCPT before
 * the message comes). The ingest statement still decides (storeEvent); this only spares a sender
 * a message that cannot be taken. Null when none, or when QUOTA_ENFORCEMENT is off.
 *
 * Far from every limit, a reading this process took under 250 ms ago decides (the usage cannot
 * have closed the headroom since; see ingest-check.ts's counterReadNeeded): a busy mailbox does
 * not cost a statement per recipient. Near a limit, the counters are read each time.
 */
export async function ingestRefusalHint(rt: Pick<Runtime, 'config' | 'db'>, project: ProjectQuotaSource, webhook: WebhookQuotaSource, opts: { bytes?: number } = {}): Promise<QuotaName | null> {
  if (!enforcing(rt)) return null;
  const key = `${project.id} ${webhook.id}`;
  const recent = readings.fresh(key);
  if (recent && refusal(recent, project, webhook, opts.bytes, true) === null) return null;
  const { rows } = await rt.db.pool.query<UsageRow>({
    name: 'ingest_refusal_hint',
    text: `SELECT metric, webhook_id <> '' AS webhook, coalesce(sum(value), 0)::bigint AS value FROM usage_counters
            WHERE project_id = $1 AND webhook_id IN ('', $2)
              AND ((metric = 'deliveries' AND period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AND webhook_id = '')
                OR (metric IN ('backlog_depth', 'stored_payload_bytes', 'file_storage_bytes') AND period = 'current'))
            GROUP BY 1, 2`,
    values: [project.id, webhook.id],
  });
  readings.remember(key, rows);
  return refusal(rows, project, webhook, opts.bytes, false);
}

/** The hint from a reading; with `headroom`, as if the usage had grown by the headroom (far from every limit, or not). */
function refusal(rows: UsageRow[], project: ProjectQuotaSource, webhook: WebhookQuotaSource, bytesAhead: number | undefined, withHeadroom: boolean): QuotaName | null {
  // `bytes`: what the ingest would store, when known ahead (a mail's declared SIZE): refused when it would not fit.
  const bytes = Math.max(0, Math.floor(bytesAhead ?? 0));
  const room = (limit: number, perRequest: number) => (withHeadroom ? headroomOf(limit, HEADROOM_REQUESTS * perRequest) : 0);
  const used = (metric: string, ofWebhook: boolean) => Number(rows.find((r) => r.metric === metric && r.webhook === ofWebhook)?.value ?? 0);
  const pq = projectQuotas(project);
  const wq = webhookQuotas(project, webhook);
  const overrides = webhookOverrides(webhook);
  const reached = (usedNow: number, limit: number) => usedNow + room(limit, 1) >= limit;
  if (!overageActive(project) && reached(used('deliveries', false), pq.monthly_deliveries)) return 'monthly_deliveries';
  if (reached(used('backlog_depth', false), pq.backlog_depth) || (overrides.backlog_depth !== undefined && reached(used('backlog_depth', true), wq.backlog_depth))) return 'backlog_depth';
  const full = (usedNow: number, limit: number) => {
    const grown = usedNow + room(limit, Math.max(bytes, 1));
    return bytes > 0 ? grown + bytes > limit : grown >= limit;
  };
  if (full(used('stored_payload_bytes', false), pq.stored_payload_bytes) || (overrides.stored_payload_bytes !== undefined && full(used('stored_payload_bytes', true), wq.stored_payload_bytes))) {
    return 'stored_payload_bytes';
  }
  return null;
}
