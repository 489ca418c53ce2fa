// A select of the project's webhooks (first 100), for filters.
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { Select, useQuery } from '../ui.tsx';

export function useWebhookNames() {
  return useQuery(() => gql(graphql(`{ webhooks(limit: 100) { items { id name status } } }`)).then((d) => d.webhooks.items as { id: string; name: string; status: string }[]), []);
}

export function WebhookSelect({ value, onChange, allLabel = 'All webhooks', name = 'webhookId' }: { value: string; onChange: (v: string) => void; allLabel?: string | null; name?: string }) {
  const hooks = useWebhookNames();
  const options: [string, string][] = (hooks.data ?? []).map((w) => [w.id, w.name ? `${w.name} (${w.status})` : w.id]);
  if (value && !options.some(([v]) => v === value)) options.unshift([value, value]);
  return <Select label="Webhook" name={name} value={value} onChange={(e) => onChange(e.currentTarget.value)} options={allLabel === null ? options : [['', allLabel], ...options]} />;
}
