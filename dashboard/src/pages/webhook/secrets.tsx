// Secrets: rotation (the new secret shown once) and the versions in effect (ingest, signing and the provider pack's).
import { useState } from 'preact/hooks';
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { Badge, ConfirmButton, Copyable, ErrorBanner, Field, Section, Table, Time, useAction, useQuery } from '../../ui.tsx';

/** `refresh`: read the versions again when it changes (a provider pack rotation elsewhere on the page). */
export function Secrets({ webhookId, refresh = 0 }: { webhookId: string; refresh?: number }) {
  const versions = useQuery(() => gql(graphql(`query($id: ID!) { webhookSecrets(id: $id) { items { kind version state createdAt expiresAt } } }`), { id: webhookId }).then((d) => d.webhookSecrets.items), [webhookId, refresh]);
  const [shown, setShown] = useState<{ label: string; secret: string; until: string }>();
  const rotate = useAction(async (kind: 'ingest' | 'signing', grace: number) => {
    if (kind === 'ingest') {
      const d = await gql(graphql(`mutation($id: ID!, $g: Int) { rotateIngestSecret(id: $id, graceSeconds: $g) { ingestSecret previousExpiresAt } }`), { id: webhookId, g: grace });
      setShown({ label: 'New ingest secret', secret: d.rotateIngestSecret.ingestSecret, until: d.rotateIngestSecret.previousExpiresAt });
    } else {
      const d = await gql(graphql(`mutation($id: ID!, $g: Int) { rotateSigningSecret(id: $id, graceSeconds: $g) { signingSecret previousExpiresAt } }`), { id: webhookId, g: grace });
      setShown({ label: 'New signing secret', secret: d.rotateSigningSecret.signingSecret, until: d.rotateSigningSecret.previousExpiresAt });
    }
    versions.reload();
  });
  const [grace, setGrace] = useState('86400');
  return (
    <Section title="Secrets">
      {shown ? (
        <div class="success-banner" role="status">
          <p>
            <strong>{shown.label}</strong> (shown once; copy it now). The previous one stays valid until <Time value={shown.until} />.
          </p>
          <Copyable value={shown.secret} label={shown.label} />
        </div>
      ) : null}
      <div class="row">
        <Field label="Grace period (s)" name="grace" type="number" min={0} value={grace} onInput={(e) => setGrace(e.currentTarget.value)} />
        <ConfirmButton label="Rotate ingest secret" title="Rotate the ingest secret?" body="Producers must switch to the new secret before the grace period ends." onConfirm={() => rotate.call('ingest', Number(grace))} />
        <ConfirmButton label="Rotate signing secret" title="Rotate the signing secret?" body="Deliveries carry signatures by both secrets during the grace period." onConfirm={() => rotate.call('signing', Number(grace))} />
      </div>
      <ErrorBanner error={rotate.error ?? versions.error} />
      {versions.data ? (
        <Table
          label="Secret versions"
          columns={['Kind', 'Version', 'State', 'Created', 'Expires']}
          items={versions.data}
          row={(v) => (
            <tr key={`${v.kind}-${v.version}`}>
              <td>{v.kind}</td>
              <td>{v.version}</td>
              <td>
                <Badge value={v.state} />
              </td>
              <td>
                <Time value={v.createdAt} />
              </td>
              <td>
                <Time value={v.expiresAt} />
              </td>
            </tr>
          )}
        />
      ) : null}
    </Section>
  );
}
