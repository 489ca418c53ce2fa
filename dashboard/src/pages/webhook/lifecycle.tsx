// Addresses and lifecycle: ingest URLs, the curl example, and pause, resume, archive, restore, destroy.
import { useLocation } from 'wouter-preact';
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ConfirmButton, Copyable, ErrorBanner, Section, Time, useAction } from '../../ui.tsx';
import { curlExample } from '../webhooks.tsx';
import { WEBHOOK, type Webhook } from './webhook.ts';

/** The lifecycle mutations, each answering the webhook as it now is. */
const LIFECYCLE = {
  pause: (id: string) => gql(graphql(`mutation($id: ID!) { pauseWebhook(id: $id) { ...WebhookFields } }`, [WEBHOOK]), { id }).then((d) => d.pauseWebhook),
  resume: (id: string) => gql(graphql(`mutation($id: ID!) { resumeWebhook(id: $id) { ...WebhookFields } }`, [WEBHOOK]), { id }).then((d) => d.resumeWebhook),
  archive: (id: string) => gql(graphql(`mutation($id: ID!) { archiveWebhook(id: $id) { ...WebhookFields } }`, [WEBHOOK]), { id }).then((d) => d.archiveWebhook),
  restore: (id: string) => gql(graphql(`mutation($id: ID!) { restoreWebhook(id: $id) { ...WebhookFields } }`, [WEBHOOK]), { id }).then((d) => d.restoreWebhook),
};

function LifecycleActions({ webhook, onChange }: { webhook: Webhook; onChange: (w?: Webhook) => void }) {
  const [, navigate] = useLocation();
  const act = useAction(async (change: keyof typeof LIFECYCLE) => onChange(await LIFECYCLE[change](webhook.id)));
  const destroy = useAction(async () => {
    await gql(graphql(`mutation($id: ID!) { destroyWebhook(id: $id) { id deleted } }`), { id: webhook.id });
    navigate('/webhooks');
  });
  return (
    <div class="stack">
      <div class="row">
        {webhook.status === 'active' ? (
          <button type="button" onClick={() => act.call('pause')} disabled={act.pending}>
            Pause
          </button>
        ) : null}
        {webhook.status === 'paused' ? (
          <button type="button" class="primary" onClick={() => act.call('resume')} disabled={act.pending}>
            Resume
          </button>
        ) : null}
        {webhook.status !== 'archived' ? (
          <ConfirmButton
            label="Archive"
            title="Archive this webhook?"
            body="Ingest will answer 404 and nothing more is delivered. Its history stays readable, and it can be restored (paused)."
            onConfirm={() => act.call('archive')}
          />
        ) : (
          <>
            <button type="button" onClick={() => act.call('restore')} disabled={act.pending}>
              Restore
            </button>
            <ConfirmButton
              label="Destroy"
              danger
              title="Destroy this webhook for good?"
              body="The webhook, its events, deliveries, attempts and DLQ entries are removed. This cannot be undone."
              confirmText={webhook.name || webhook.id}
              confirmLabel="Destroy forever"
              onConfirm={() => destroy.call()}
            />
          </>
        )}
      </div>
      <ErrorBanner error={act.error ?? destroy.error} />
    </div>
  );
}

/** The addresses a producer sends to, and the lifecycle (pause, resume, archive, restore, destroy). */
export function AddressesAndLifecycle({ webhook, onChange }: { webhook: Webhook; onChange: (w?: Webhook) => void }) {
  const w = webhook;
  return (
    <Section title="Addresses and lifecycle">
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{w.id}</code>
        </dd>
        <dt>Ingest URL</dt>
        <dd>
          <Copyable value={w.ingestUrl} label="Ingest URL" />
        </dd>
        <dt>Form ingest URL</dt>
        <dd>
          <code>{w.formIngestUrl}</code>
        </dd>
        <dt>Email address</dt>
        <dd>
          <code>{w.emailIngestAddress}</code>
        </dd>
        <dt>Created</dt>
        <dd>
          <Time value={w.createdAt} />
        </dd>
      </dl>
      <details>
        <summary>Send a test event with curl</summary>
        <pre class="code">{curlExample(w.ingestUrl)}</pre>
      </details>
      <h3>Lifecycle</h3>
      <LifecycleActions webhook={webhook} onChange={onChange} />
    </Section>
  );
}
