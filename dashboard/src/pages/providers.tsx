// Provider packs: which providers' own signatures ingest can verify (set per webhook on its page).
import { Link } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ErrorBanner, Loading, Page, Table, useQuery } from '../ui.tsx';

export default function ProvidersPage() {
  const q = useQuery(() => gql(graphql(`{ providers { items { id name scheme header secretDescription toleranceSeconds eventType deliveryId } } }`)).then((d) => d.providers.items), []);
  return (
    <Page title="Provider packs">
      <p>
        A webhook with a provider pack also accepts events signed the provider's own way (Starter and above). Choose one on a <Link href="/webhooks">webhook's page</Link>, under “Provider pack”.
      </p>
      <ErrorBanner error={q.error} />
      {q.loading ? <Loading /> : null}
      {q.data ? (
        <Table
          label="Provider packs"
          columns={['Provider', 'Signature header', 'Scheme', 'Tolerance', 'Secret to give', 'Event type from']}
          items={q.data}
          row={(p) => (
            <tr key={p.id}>
              <td>
                <strong>{p.name}</strong> <code class="muted">{p.id}</code>
              </td>
              <td>
                <code>{p.header}</code>
              </td>
              <td>{p.scheme}</td>
              <td>{p.toleranceSeconds ? `${p.toleranceSeconds} s` : '—'}</td>
              <td>{p.secretDescription}</td>
              <td>{p.eventType.join(', ') || '—'}</td>
            </tr>
          )}
        />
      ) : null}
    </Page>
  );
}
