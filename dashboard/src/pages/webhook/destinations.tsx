// Destinations: each with its config (edit, delete), a cli one's listener state, and adding one.
import { useEffect, useState } from 'preact/hooks';
import { gql } from '../../api.ts';
import { graphql, toJson } from '../../graphql.ts';
import { ActionForm, ConfirmButton, Copyable, ErrorBanner, Field, formText, Json, parseJsonField, Section, Select, TextArea, useAction } from '../../ui.tsx';
import { DESTINATION_TYPES } from '../../destination-types.ts';
import type { Destination } from './webhook.ts';

/** How often a cli destination's listener state is asked again while the page is open. */
const LISTENER_POLL_MS = 5_000;

/** A cli destination: whether `relay listen` is connected now, and the command that connects one. */
function ListenerStatus({ webhookId, d }: { webhookId: string; d: Destination }) {
  const [connected, setConnected] = useState(d.listenerConnected);
  useEffect(() => {
    let live = true;
    const timer = setInterval(() => {
      gql(graphql(`query($id: ID!) { webhookDestinations(id: $id) { items { id listenerConnected } } }`), { id: webhookId }).then(
        (data) => live && setConnected(data.webhookDestinations.items.find((x) => x.id === d.id)?.listenerConnected ?? false),
        () => {},
      );
    }, LISTENER_POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [webhookId, d.id]);
  const command = `relay listen ${webhookId}${d.isDefault ? '' : ` --destination ${d.id}`} --forward-to http://localhost:4000/webhooks`;
  return (
    <div class="stack">
      <p role="status">
        {connected ? <span class="badge tone-ok">listener connected</span> : <span class="badge tone-warn">no listener</span>}{' '}
        <span class="muted">
          {connected
            ? 'Deliveries go to a relay listen session, which sends them from the developer\'s machine.'
            : 'Attempts fail with "no listener connected" and are retried until a relay listen session connects.'}
        </span>
      </p>
      <Copyable value={command} label="The command that forwards this destination's deliveries to a local server" />
    </div>
  );
}

function DestinationRow({ webhookId, d, onChange }: { webhookId: string; d: Destination; onChange: () => void }) {
  const [editing, setEditing] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    await gql(graphql(`mutation($id: ID!, $destinationId: ID!, $name: String, $config: JSON) { updateDestination(id: $id, destinationId: $destinationId, name: $name, config: $config) { id } }`), {
      id: webhookId,
      destinationId: d.id,
      name: formText(f, 'name'),
      config: parseJsonField(String(f.get('config')), 'Config'),
    });
    setEditing(false);
    onChange();
  });
  const remove = useAction(async () => {
    await gql(graphql(`mutation($id: ID!, $destinationId: ID!) { deleteDestination(id: $id, destinationId: $destinationId) { id } }`), { id: webhookId, destinationId: d.id });
    onChange();
  });
  return (
    <li class="card">
      <div class="card-header">
        <h3>
          {d.name} {d.isDefault ? <span class="badge tone-info">default</span> : null}
        </h3>
        <span class="muted">{d.type}</span>
        <div class="row">
          <button type="button" class="small" aria-expanded={editing} onClick={() => setEditing(!editing)}>
            {editing ? 'Cancel' : 'Edit'}
          </button>
          {d.isDefault ? null : (
            <ConfirmButton label="Delete" danger title={`Delete destination ${d.name}?`} body="Routing rules that use it must be removed first." onConfirm={() => remove.call()} />
          )}
        </div>
      </div>
      {editing ? (
        <ActionForm action={save} submit="Save destination">
          <Field label="Name" name="name" defaultValue={d.name} />
          <TextArea label="Config (JSON)" name="config" defaultValue={JSON.stringify(d.config, null, 2)} hint="Replaced as a whole; stored credentials are kept when left out." />
        </ActionForm>
      ) : (
        <Json value={d.config} />
      )}
      {d.type === 'cli' ? <ListenerStatus webhookId={webhookId} d={d} /> : null}
      {d.hasCredentials ? <p class="muted">Credentials are stored (sealed, never shown).</p> : null}
      <ErrorBanner error={remove.error} />
    </li>
  );
}

export function Destinations({ webhookId, destinations, onChange }: { webhookId: string; destinations: Destination[]; onChange: () => void }) {
  const add = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    await gql(graphql(`mutation($id: ID!, $name: String!, $type: String!, $config: JSON!) { createDestination(id: $id, name: $name, type: $type, config: $config) { id } }`), {
      id: webhookId,
      name: formText(f, 'name') ?? '',
      type: formText(f, 'type') ?? '',
      config: parseJsonField(String(f.get('config')), 'Config') ?? toJson({}),
    });
    form.reset();
    onChange();
  });
  return (
    <Section title="Destinations">
      <ul class="list stack">
        {destinations.map((d) => (
          <DestinationRow key={d.id} webhookId={webhookId} d={d} onChange={onChange} />
        ))}
      </ul>
      <details>
        <summary>Add a destination</summary>
        <ActionForm action={add} submit="Add destination">
          <div class="grid">
            <Field label="Name" name="name" required placeholder="archive" />
            <Select label="Type" name="type" options={DESTINATION_TYPES} />
          </div>
          <TextArea label="Config (JSON)" name="config" placeholder='{"url": "https://example.com/archive"}' hint="webhook: {url, method?, headers?}; cli: {} (delivered through relay listen); other types take their own settings and credentials." />
        </ActionForm>
      </details>
    </Section>
  );
}
