// API keys: create (the key is shown once), list, revoke.
import { useState } from 'preact/hooks';
import { gql, session } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ActionForm, Badge, ConfirmButton, Copyable, Empty, Field, Page, PagedTable, Row, Section, Time, useAction, usePaged } from '../ui.tsx';

export default function ApiKeysPage() {
  const list = usePaged((cursor) => gql(graphql(`query($cursor: String) { apiKeys(limit: 50, cursor: $cursor) { items { id name prefix createdAt lastUsedAt revokedAt } nextCursor } }`), { cursor }).then((d) => d.apiKeys), []);
  const [created, setCreated] = useState<{ key: string; name: string }>();
  const create = useAction(async (form: HTMLFormElement) => {
    const name = String(new FormData(form).get('name') ?? '') || undefined;
    const d = await gql(graphql(`mutation($name: String) { createApiKey(name: $name) { key apiKey { name } } }`), { name });
    setCreated({ key: d.createApiKey.key, name: d.createApiKey.apiKey.name });
    form.reset();
    list.reload();
  });
  const revoke = useAction(async (id: string) => {
    await gql(graphql(`mutation($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }`), { id });
    list.reload();
  });
  return (
    <Page title="API keys">
      <Section title="Create a key">
        <ActionForm action={create} submit="Create key" class="row">
          <Field label="Name" name="name" placeholder="ci-deploys" />
        </ActionForm>
        {created ? (
          <div class="success-banner" role="status">
            <p>
              Key “{created.name}” created. Copy it now: it is <strong>shown only once</strong>.
            </p>
            <Copyable value={created.key} label="New API key" />
            <pre class="code">{`curl -H 'Authorization: Bearer ${created.key}' ${session.publicUrl}/v1/project`}</pre>
          </div>
        ) : null}
      </Section>
      <PagedTable
        list={list}
        error={revoke.error}
        label="API keys"
        columns={['Name', 'Prefix', 'Created', 'Last used', 'State']}
        actions
        empty={<Empty title="No API keys">Create one above to call the API from your code.</Empty>}
        row={(k) => (
          <Row
            key={k.id}
            cells={[
              k.name,
              <code>{k.prefix}…</code>,
              <Time value={k.createdAt} />,
              <Time value={k.lastUsedAt} />,
              <Badge value={k.revokedAt ? 'revoked' : 'active'} />,
              k.revokedAt ? null : (
                <ConfirmButton label={`Revoke ${k.name}`} danger title={`Revoke “${k.name}”?`} body="It stops working at once, on every process. This cannot be undone." confirmLabel="Revoke" onConfirm={() => revoke.call(k.id)} />
              ),
            ]}
          />
        )}
      />
    </Page>
  );
}
