// `relay deliveries list` and `relay deliveries replay`, over the REST API.
import type { Output } from './output.ts';
import type { RestClient } from './rest.ts';

interface Delivery {
  id: string;
  webhookId: string;
  status: string;
  attempts: number;
  createdAt: string;
  lastAttempt: { statusCode: number | null; durationMs: number | null; error: string | null } | null;
  destination: { type?: string; name?: string } | null;
}

export interface ListOptions {
  webhook?: string;
  status?: string;
  limit?: string;
  cursor?: string;
}

function lastOf(d: Delivery): string {
  const a = d.lastAttempt;
  if (!a) return '-';
  const what = a.statusCode !== null ? String(a.statusCode) : a.error ? `error: ${a.error}` : '-';
  return a.durationMs !== null ? `${what} (${a.durationMs} ms)` : what;
}

export async function listDeliveries(api: RestClient, opts: ListOptions, out: Output): Promise<void> {
  const page = await api.get<{ items: Delivery[]; nextCursor: string | null }>('/v1/deliveries', { webhookId: opts.webhook, status: opts.status, limit: opts.limit, cursor: opts.cursor });
  if (out.json) {
    out.line('', page as unknown as Record<string, unknown>);
    return;
  }
  if (!page.items.length) out.line('No deliveries.', {});
  for (const d of page.items) {
    const dest = d.destination?.name ? `${d.destination.name} (${d.destination.type ?? '?'})` : '-';
    out.line(`${d.createdAt}  ${d.id}  ${d.webhookId}  ${d.status.padEnd(10)}  ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}  last: ${lastOf(d)}  to ${dest}`, {});
  }
  if (page.nextCursor) out.line(`More: --cursor ${page.nextCursor}`, {});
}

export async function replayDelivery(api: RestClient, deliveryId: string, out: Output): Promise<void> {
  const job = await api.post<{ id: string; status: string; sourceDeliveryId: string | null }>(`/v1/deliveries/${encodeURIComponent(deliveryId)}/replay`);
  out.line(`Replay ${job.id} of ${deliveryId}: ${job.status}. A new delivery re-sends the same bytes, with the same webhook-id.`, job as unknown as Record<string, unknown>);
}
