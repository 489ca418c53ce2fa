// Quota overrides: this webhook's limits, tighter than the project's.
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, ErrorBanner, Field, Section, useAction, useQuery } from '../../ui.tsx';

const QUOTAS = ['ingest_rate', 'backlog_depth', 'stored_payload_bytes', 'file_storage_bytes', 'replay_volume', 'payload_retention_seconds', 'history_retention_seconds'] as const;

export function QuotaOverrides({ webhookId }: { webhookId: string }) {
  const q = useQuery(
    () =>
      gql(
        graphql(`
          query ($id: ID!) {
            webhookQuotaOverrides(id: $id) {
              quotaOverrides { ingest_rate backlog_depth stored_payload_bytes file_storage_bytes replay_volume payload_retention_seconds history_retention_seconds }
              effectiveQuotas { ingest_rate backlog_depth stored_payload_bytes file_storage_bytes replay_volume payload_retention_seconds history_retention_seconds }
            }
          }
        `),
        { id: webhookId },
      ),
    [webhookId],
  );
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const vars: Partial<Record<(typeof QUOTAS)[number], number | null>> = {};
    for (const k of QUOTAS) {
      const v = String(f.get(k) ?? '').trim();
      vars[k] = v === '' ? null : Number(v);
    }
    await gql(
      graphql(`
        mutation ($id: ID!, $ingest_rate: SafeInt, $backlog_depth: SafeInt, $stored_payload_bytes: SafeInt, $file_storage_bytes: SafeInt, $replay_volume: SafeInt, $payload_retention_seconds: SafeInt, $history_retention_seconds: SafeInt) {
          setWebhookQuotaOverrides(id: $id, ingest_rate: $ingest_rate, backlog_depth: $backlog_depth, stored_payload_bytes: $stored_payload_bytes, file_storage_bytes: $file_storage_bytes, replay_volume: $replay_volume, payload_retention_seconds: $payload_retention_seconds, history_retention_seconds: $history_retention_seconds) { webhookId }
        }
      `),
      { id: webhookId, ...vars },
    );
    q.reload();
  });
  if (!q.data) return <ErrorBanner error={q.error} />;
  const o = q.data.webhookQuotaOverrides;
  return (
    <Section title="Quota overrides">
      <ActionForm action={save} submit="Save overrides" done="Overrides saved.">
        <p class="muted">Tighten the project's limits for this webhook; empty: the project's limit.</p>
        <div class="grid">
          {QUOTAS.map((k) => (
            <Field key={k} label={k.replace(/_/g, ' ')} name={k} type="number" min={0} defaultValue={o.quotaOverrides[k] ?? ''} hint={`In effect: ${o.effectiveQuotas[k]}`} />
          ))}
        </div>
      </ActionForm>
    </Section>
  );
}
