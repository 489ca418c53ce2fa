// Provider pack: the provider whose own signature ingest verifies, its secret and tolerance.
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, ErrorBanner, Field, formText, Section, Select, useAction, useQuery } from '../../ui.tsx';

/** `onSaved`: after a save (a rotation adds a secret version, listed by the Secrets section). */
export function ProviderPack({ webhookId, onSaved }: { webhookId: string; onSaved?: () => void }) {
  const q = useQuery(
    () => gql(graphql(`query($id: ID!) { webhookProvider(id: $id) { provider toleranceSeconds } providers { items { id name secretDescription } } }`), { id: webhookId }),
    [webhookId],
  );
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const tolerance = String(f.get('toleranceSeconds') ?? '');
    const grace = String(f.get('graceSeconds') ?? '').trim();
    await gql(
      graphql(`mutation($id: ID!, $provider: String, $secret: String, $tol: Int, $grace: Int) { setWebhookProvider(id: $id, provider: $provider, secret: $secret, toleranceSeconds: $tol, graceSeconds: $grace) { provider } }`),
      {
        id: webhookId,
        provider: formText(f, 'provider') ?? null,
        secret: formText(f, 'secret'),
        tol: tolerance ? Number(tolerance) : null,
        grace: grace ? Number(grace) : undefined,
      },
    );
    q.reload();
    onSaved?.();
  });
  if (!q.data) return <ErrorBanner error={q.error} />;
  return (
    <Section title="Provider pack">
      <ActionForm action={save} submit="Save provider pack" done="Provider pack saved." formKey={q.data.webhookProvider.provider ?? ''}>
        <p class="muted">Ingest also verifies the provider's own signature (Starter and above). The secret is sealed and never shown.</p>
        <div class="grid">
          <Select label="Provider" name="provider" defaultValue={q.data.webhookProvider.provider ?? ''} options={[['', 'none'], ...q.data.providers.items.map((p) => [p.id, p.name] as [string, string])]} />
          <Field label="Provider secret" name="secret" type="password" autoComplete="off" hint="Left empty: the stored one is kept." />
          <Field label="Tolerance (s)" name="toleranceSeconds" type="number" min={1} max={86400} defaultValue={q.data.webhookProvider.toleranceSeconds ?? ''} />
          <Field
            label="Previous secret's grace (s)"
            name="graceSeconds"
            type="number"
            min={0}
            placeholder="86400"
            hint="A new secret for the same provider: the previous one still verifies this long (empty: a day; 0: dropped at once)."
          />
        </div>
      </ActionForm>
    </Section>
  );
}
