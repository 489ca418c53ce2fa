import type { QuotaName } from '../../errors.ts';
import type { Runtime } from '../../runtime.ts';
import { enforcing, overageActive, projectQuotas, webhookOverrides, webhookQuotas, type ProjectQuotaSource, type WebhookQuotaSource } from './limits.ts';

/**
 * Which stored-amount or monthly quota would refuse an ingest now, if any, read without counting
 * anything: for a channel that must answer before it has the event (SMTP answers each RCPT before
 * the message comes). The ingest statement still decides (storeEvent); this only spares a sender
 * a message that cannot be taken. Null when none, or when QUOTA_ENFORCEMENT is off.
 */
export async function ingestRefusalHint(rt: Pick<Runtime, 'config' | 'db'>, project: ProjectQuotaSource, webhook: WebhookQuotaSource, opts: { bytes?: number } = {}): Promise<QuotaName | null> {
  if (!enforcing(rt)) return null;
  const { rows } = await rt.db.pool.query<{ metric: string; webhook: boolean; value: string }>({
    name: 'ingest_refusal_hint',
    text: `SELECT metric, webhook_id <> '' AS webhook, coalesce(sum(value), 0)::bigint AS value FROM usage_counters
            WHERE project_id = $1 AND webhook_id IN ('', $2)
              AND ((metric = 'deliveries' AND period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AND webhook_id = '')
                OR (metric IN ('backlog_depth', 'stored_payload_bytes', 'file_storage_bytes') AND period = 'current'))
            GROUP BY 1, 2`,
    values: [project.id, webhook.id],
  });
  const used = (metric: string, ofWebhook: boolean) => Number(rows.find((r) => r.metric === metric && r.webhook === ofWebhook)?.value ?? 0);
  const pq = projectQuotas(project);
  const wq = webhookQuotas(project, webhook);
  const overrides = webhookOverrides(webhook);
  if (!overageActive(project) && used('deliveries', false) >= pq.monthly_deliveries) return 'monthly_deliveries';
  if (used('backlog_depth', false) >= pq.backlog_depth || (overrides.backlog_depth !== undefined && used('backlog_depth', true) >= wq.backlog_depth)) return 'backlog_depth';
  // `bytes`: what the ingest would store, when known ahead (a mail's declared SIZE): refused when it would not fit.
  const bytes = Math.max(0, Math.floor(opts.bytes ?? 0));
  const full = (usedNow: number, limit: number) => (bytes > 0 ? usedNow + bytes > limit : usedNow >= limit);
  if (full(used('stored_payload_bytes', false), pq.stored_payload_bytes) || (overrides.stored_payload_bytes !== undefined && full(used('stored_payload_bytes', true), wq.stored_payload_bytes))) {
    return 'stored_payload_bytes';
  }
  return null;
}
