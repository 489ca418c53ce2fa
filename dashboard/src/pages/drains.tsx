// Event drains (CONTRACT §9, Pro and above): the project's state changes streamed in signed
// batches. Create (the signing secret shown once), edit, enable/disable, rotate the secret, delete.
import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { ActionForm, Badge, ConfirmButton, Copyable, Empty, ErrorBanner, Field, Page, PagedCards, Section, Time, useAction, usePaged } from '../ui.tsx';

export const DRAIN_EVENTS = ['delivery.succeeded', 'delivery.failed', 'delivery.retrying', 'attempt.finished', 'dlq.added', 'webhook.changed'];
const FIELDS = graphql(`fragment DrainFields on EventDrain @_unmask { id name url events enabled lastSentAt lastError droppedCount createdAt updatedAt }`);

function drainVars(form: HTMLFormElement) {
  const f = new FormData(form);
  return {
    name: String(f.get('name') ?? '') || undefined,
    url: String(f.get('url') ?? '') || undefined,
    events: f.getAll('events').map(String),
    enabled: f.get('enabled') === 'on',
  };
}

type Drain = ResultOf<typeof FIELDS>;

function DrainFields({ d }: { d?: Drain }) {
  return (
    <>
      <div class="grid">
        <Field label="Name" name="name" defaultValue={d?.name ?? ''} placeholder="siem" />
        <Field label="URL" name="url" type="url" required defaultValue={d?.url ?? ''} placeholder="https://logs.example.com/relay" hint={'Receives POST {"events": [...]}, Standard-Webhooks-signed.'} />
      </div>
      <fieldset class="checks">
        <legend>Events</legend>
        {DRAIN_EVENTS.map((k) => (
          <label key={k} class="row">
            <input type="checkbox" name="events" value={k} defaultChecked={d ? d.events.includes(k) : true} /> {k}
          </label>
        ))}
      </fieldset>
      <label class="row">
        <input type="checkbox" name="enabled" defaultChecked={d ? d.enabled : true} /> Enabled
      </label>
    </>
  );
}

function SecretOnce({ title, secret }: { title: string; secret: string }) {
  return (
    <div class="success-banner" role="status">
      <p>
        {title} Copy the signing secret now: it is <strong>shown only once</strong>.
      </p>
      <Copyable value={secret} label="Drain signing secret" />
    </div>
  );
}

function DrainCard({ d, onChange }: { d: Drain; onChange: () => void }) {
  const [editing, setEditing] = useState(false);
  const [secret, setSecret] = useState<string>();
  const save = useAction(async (form: HTMLFormElement) => {
    await gql(graphql(`mutation($id: ID!, $name: String, $url: String, $events: [String!], $enabled: Boolean) { updateDrain(id: $id, name: $name, url: $url, events: $events, enabled: $enabled) { id } }`), { id: d.id, ...drainVars(form) });
    setEditing(false);
    onChange();
  });
  const toggle = useAction(async () => {
    await gql(graphql(`mutation($id: ID!, $enabled: Boolean) { updateDrain(id: $id, enabled: $enabled) { id } }`), { id: d.id, enabled: !d.enabled });
    onChange();
  });
  const rotate = useAction(async () => {
    const r = await gql(graphql(`mutation($id: ID!) { rotateDrainSecret(id: $id) { signingSecret } }`), { id: d.id });
    setSecret(r.rotateDrainSecret.signingSecret);
  });
  const remove = useAction(async () => {
    await gql(graphql(`mutation($id: ID!) { deleteDrain(id: $id) { id } }`), { id: d.id });
    onChange();
  });
  return (
    <li class="card" data-drain-id={d.id}>
      <div class="card-header">
        <h3>{d.name || d.id}</h3>
        <Badge value={d.enabled ? 'enabled' : 'disabled'} />
        <div class="row">
          <button type="button" class="small" onClick={() => void toggle.call()} disabled={toggle.pending}>
            {d.enabled ? 'Disable' : 'Enable'}
          </button>
          <button type="button" class="small" aria-expanded={editing} onClick={() => setEditing(!editing)}>
            {editing ? 'Cancel' : 'Edit'}
          </button>
          <ConfirmButton small label="Rotate secret" title={`Rotate the signing secret of ${d.name || d.id}?`} body="A new secret signs from now on; the previous one still signs beside it for 24 hours, so the receiver can switch." confirmLabel="Rotate" onConfirm={() => rotate.call()} />
          <ConfirmButton small label="Delete" danger title={`Delete drain ${d.name || d.id}?`} body="Its unsent events are dropped." onConfirm={() => remove.call()} />
        </div>
      </div>
      {secret ? <SecretOnce title="New signing secret." secret={secret} /> : null}
      <dl class="facts">
        <dt>URL</dt>
        <dd>
          <code>{d.url}</code>
        </dd>
        <dt>Events</dt>
        <dd>{d.events.join(', ')}</dd>
        <dt>Last sent</dt>
        <dd>
          <Time value={d.lastSentAt} />
        </dd>
        <dt>Dropped</dt>
        <dd>{d.droppedCount}</dd>
        {d.lastError ? (
          <>
            <dt>Last error</dt>
            <dd class="error-text">{d.lastError}</dd>
          </>
        ) : null}
      </dl>
      {editing ? (
        <ActionForm action={save} submit="Save drain">
          <DrainFields d={d} />
        </ActionForm>
      ) : null}
      <ErrorBanner error={toggle.error ?? rotate.error ?? remove.error} />
    </li>
  );
}

export default function DrainsPage() {
  const list = usePaged((cursor) => gql(graphql(`query($cursor: String) { drains(limit: 50, cursor: $cursor) { items { ...DrainFields } nextCursor } }`, [FIELDS]), { cursor }).then((d) => d.drains), []);
  const [created, setCreated] = useState<{ name: string; secret: string }>();
  const create = useAction(async (form: HTMLFormElement) => {
    const d = await gql(graphql(`mutation($name: String, $url: String, $events: [String!], $enabled: Boolean) { createDrain(name: $name, url: $url, events: $events, enabled: $enabled) { id name signingSecret } }`), drainVars(form));
    setCreated({ name: d.createDrain.name || d.createDrain.id, secret: d.createDrain.signingSecret });
    form.reset();
    list.reload();
  });
  return (
    <Page title="Event drains">
      <p class="muted">A drain receives the project's state changes (deliveries, attempts, DLQ entries, webhook changes) in signed batches, for a log pipeline or a SIEM. Pro and above.</p>
      {created ? <SecretOnce title={`Drain “${created.name}” created.`} secret={created.secret} /> : null}
      <PagedCards
        list={list}
        empty={<Empty title="No drains yet">Add one below with the URL that should receive the batches.</Empty>}
        card={(d) => <DrainCard key={`${d.id}-${d.updatedAt}`} d={d} onChange={list.reload} />}
      />
      <Section title="New drain">
        <ActionForm action={create} submit="Create drain">
          <DrainFields />
        </ActionForm>
      </Section>
    </Page>
  );
}
