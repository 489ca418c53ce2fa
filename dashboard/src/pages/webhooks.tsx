// Webhooks: the list with status, and creation (every control) with the secrets shown once.
import { useState } from 'preact/hooks';
import { Link, useSearch } from 'wouter-preact';
import { gql, session } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ActionForm, Badge, Copyable, CreateToggle, Empty, Page, PagedTable, Section, Time, useAction, usePaged } from '../ui.tsx';
import { WebhookControls, controlsFromForm } from '../parts/webhook-controls.tsx';
import { Sparkline, useActivity } from '../parts/activity.tsx';

const FIELDS = graphql(`fragment WebhookListFields on Webhook @_unmask { id name status publicId ingestUrl deliveryMode createdAt }`);
const STATUSES = ['all', 'active', 'paused', 'archived'] as const;

export interface CreatedWebhook {
  id: string;
  name: string;
  ingestUrl: string;
  ingestSecret: string;
  signingSecret: string;
}

export function curlExample(ingestUrl: string, secret = '<ingest secret>') {
  return `curl -X POST '${ingestUrl}' \\\n  -H 'Authorization: Bearer ${secret}' \\\n  -H 'content-type: application/json' \\\n  -d '{"type":"hello","data":{"n":1}}'`;
}

function CreateWebhook({ onCreated }: { onCreated: (w: CreatedWebhook) => void }) {
  const create = useAction(async (form: HTMLFormElement) => {
    const vars = controlsFromForm(form);
    const data = await gql(
      graphql(`mutation Create($name: String, $url: String, $maxInFlight: Int, $timeoutMs: Int, $deliveryMode: DeliveryMode, $throttleRatePerSecond: Int, $defaultDelaySeconds: Int, $dedupeWindowSeconds: Int, $idempotencyWindowSeconds: Int, $retryPolicy: JSON, $customHeaders: JSON) {
        createWebhook(name: $name, url: $url, maxInFlight: $maxInFlight, timeoutMs: $timeoutMs, deliveryMode: $deliveryMode, throttleRatePerSecond: $throttleRatePerSecond, defaultDelaySeconds: $defaultDelaySeconds, dedupeWindowSeconds: $dedupeWindowSeconds, idempotencyWindowSeconds: $idempotencyWindowSeconds, retryPolicy: $retryPolicy, customHeaders: $customHeaders) { id name ingestUrl ingestSecret signingSecret }
      }`),
      vars,
    );
    onCreated(data.createWebhook);
  });
  return (
    <Section title="New webhook">
      <ActionForm action={create} submit="Create webhook">
        <WebhookControls />
      </ActionForm>
    </Section>
  );
}

export function SecretsOnce({ created }: { created: CreatedWebhook }) {
  return (
    <div class="success-banner" role="status">
      <h2>Webhook “{created.name}” created</h2>
      <p>Copy the secrets now: they are shown only once.</p>
      <dl class="facts">
        <dt>Ingest URL</dt>
        <dd>
          <Copyable value={created.ingestUrl} label="Ingest URL" />
        </dd>
        <dt>Ingest secret</dt>
        <dd>
          <Copyable value={created.ingestSecret} label="Ingest secret" />
        </dd>
        <dt>Signing secret</dt>
        <dd>
          <Copyable value={created.signingSecret} label="Signing secret" />
        </dd>
      </dl>
      <p>Send a first event:</p>
      <pre class="code">{curlExample(created.ingestUrl, created.ingestSecret)}</pre>
      <Link href={`/webhooks/${created.id}`}>Open the webhook</Link>
    </div>
  );
}

export default function WebhooksPage() {
  const search = new URLSearchParams(useSearch());
  const status = (STATUSES as readonly string[]).includes(search.get('status') ?? '') ? search.get('status')! : 'all';
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedWebhook>();
  const list = usePaged(
    (cursor) =>
      gql(graphql(`query($cursor: String, $status: WebhookStatus) { webhooks(limit: 50, cursor: $cursor, status: $status) { items { ...WebhookListFields } nextCursor } }`, [FIELDS]), {
        cursor,
        status: status === 'all' ? null : (status as Exclude<(typeof STATUSES)[number], 'all'>),
      }).then((d) => d.webhooks),
    [status],
  );
  const activity = useActivity(list.items.map((w) => w.id));
  return (
    <Page
      title="Webhooks"
      actions={<CreateToggle open={creating} onToggle={setCreating} label="New webhook" />}
    >
      {created ? <SecretsOnce created={created} /> : null}
      {creating ? (
        <CreateWebhook
          onCreated={(w) => {
            setCreated(w);
            setCreating(false);
            list.reload();
          }}
        />
      ) : null}
      <nav class="tabs" aria-label="Filter by status">
        {STATUSES.map((s) => (
          <Link key={s} href={s === 'all' ? '/webhooks' : `/webhooks?status=${s}`} aria-current={s === status ? 'true' : undefined}>
            {s}
          </Link>
        ))}
      </nav>
      <PagedTable
        list={list}
        label="Webhooks"
        columns={['Name', 'Status', 'Last 24 h', 'Ingest URL', 'Mode', 'Created']}
        empty={
          <Empty title={status === 'all' ? 'No webhooks yet' : `No ${status} webhooks`}>
            <p>Create a webhook with “New webhook”: it gets an ingest URL that accepts events. Then send a first event:</p>
            <pre class="code">{curlExample(`${session.publicUrl}/i/<publicId>`)}</pre>
          </Empty>
        }
        row={(w) => (
          <tr key={w.id}>
            <td>
              <Link href={`/webhooks/${w.id}`}>{w.name || w.id}</Link>
            </td>
            <td>
              <Badge value={w.status} />
            </td>
            <td>
              <Sparkline activity={activity.data?.get(w.id)} />
            </td>
            <td>
              <code>{w.ingestUrl}</code>
            </td>
            <td>{w.deliveryMode}</td>
            <td>
              <Time value={w.createdAt} />
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
