// One webhook: its sections, one file each under pages/webhook/ (addresses and lifecycle, recent
// deliveries (live), settings, destinations, routing rules, transform, the test-delivery probe,
// secrets, provider pack, quota overrides, the email sender allowlist and browser forms).
import { useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { Badge, ErrorBanner, Loading, Page, slug, useQuery } from '../ui.tsx';
import { DESTINATION, WEBHOOK, type Webhook } from './webhook/webhook.ts';
import { AddressesAndLifecycle } from './webhook/lifecycle.tsx';
import { RecentDeliveries } from './webhook/recent-deliveries.tsx';
import { Settings } from './webhook/settings.tsx';
import { Destinations } from './webhook/destinations.tsx';
import { Routing } from './webhook/routing.tsx';
import { Transform } from './webhook/transform.tsx';
import { Probe } from './webhook/test-delivery.tsx';
import { Secrets } from './webhook/secrets.tsx';
import { ProviderPack } from './webhook/provider-pack.tsx';
import { QuotaOverrides } from './webhook/quota-overrides.tsx';
import { EmailAllowlist } from './webhook/email-allowlist.tsx';
import { BrowserForms } from './webhook/browser-forms.tsx';

const SECTIONS = ['Addresses and lifecycle', 'Recent deliveries', 'Settings', 'Destinations', 'Routing rules', 'Transform', 'Test delivery', 'Secrets', 'Provider pack', 'Quota overrides', 'Email sender allowlist', 'Browser forms'];

export default function WebhookPage({ params }: { params: Record<string, string | undefined> }) {
  const id = params.id!;
  // Bumped when the provider pack is saved: a rotation adds a version the Secrets section lists.
  const [secretsSeen, setSecretsSeen] = useState(0);
  const q = useQuery(
    () =>
      gql(
        graphql(
          `query($id: ID!) {
            webhook(id: $id) { ...WebhookFields }
            webhookDestinations(id: $id) { items { ...DestinationFields } }
            webhookRouting(id: $id) { rules { name priority destinationId match } }
            webhookTransform(id: $id) { kind expression automationId version }
          }`,
          [WEBHOOK, DESTINATION],
        ),
        { id },
      ),
    [id],
  );
  if (q.error) return <Page title="Webhook"><ErrorBanner error={q.error} /><Link href="/webhooks">Back to webhooks</Link></Page>;
  if (!q.data) return <Loading />;
  const w = q.data.webhook;
  const setWebhook = (next?: Webhook) => (next ? q.setData((d) => d && { ...d, webhook: next }) : q.reload());
  return (
    <Page
      title={w.name || w.id}
      actions={
        <>
          <Badge value={w.status} />
          <Link class="button" href={`/deliveries?webhookId=${w.id}`}>
            Deliveries
          </Link>
          <Link class="button" href={`/schedules?webhookId=${w.id}`}>
            Schedules
          </Link>
          <Link class="button" href={`/metrics?webhookId=${w.id}`}>
            Metrics
          </Link>
        </>
      }
    >
      <nav class="toc" aria-label="On this page">
        {SECTIONS.map((t) => (
          <a key={t} href={`#${slug(t)}`}>
            {t}
          </a>
        ))}
      </nav>
      <AddressesAndLifecycle webhook={w} onChange={setWebhook} />
      <RecentDeliveries webhookId={id} />
      <Settings webhook={w} onSaved={setWebhook} />
      <Destinations webhookId={id} destinations={q.data.webhookDestinations.items} onChange={q.reload} />
      <Routing key={JSON.stringify(q.data.webhookRouting.rules)} webhookId={id} rules={q.data.webhookRouting.rules} destinations={q.data.webhookDestinations.items} />
      <Transform webhookId={id} transform={q.data.webhookTransform} />
      <Probe webhookId={id} />
      <Secrets webhookId={id} refresh={secretsSeen} />
      <ProviderPack webhookId={id} onSaved={() => setSecretsSeen((n) => n + 1)} />
      <QuotaOverrides webhookId={id} />
      <EmailAllowlist webhookId={id} />
      <BrowserForms webhook={w} onSaved={setWebhook} />
    </Page>
  );
}
