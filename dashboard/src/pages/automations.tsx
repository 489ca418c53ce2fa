// Automations (CONTRACT §10): the list, creating one (name and code), and the egress policy
// (Enterprise). One automation's code, versions and runs: pages/automation.tsx.
import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ActionForm, Badge, CreateToggle, Empty, ErrorBanner, Field, formText, Page, PagedTable, Row, Section, TextArea, Time, useAction, usePaged, useQuery } from '../ui.tsx';

export const EXAMPLE_CODE = `// The event in, the payload to deliver out (null: do not deliver).
export default async function (event, ctx) {
  console.log('type', event.body?.type);
  return { ...event.body, receivedAt: new Date().toISOString() };
}
`;

function EgressPolicy() {
  const q = useQuery(() => gql(graphql(`{ egressPolicy { allowedHosts } }`)).then((d) => d.egressPolicy.allowedHosts as string[]), []);
  const save = useAction(async (form: HTMLFormElement) => {
    const text = String(new FormData(form).get('allowedHosts') ?? '');
    const hosts = text.split(/[\s,]+/).filter(Boolean);
    const d = await gql(graphql(`mutation($h: [String!]) { setEgressPolicy(allowedHosts: $h) { allowedHosts } }`), { h: hosts });
    q.setData(() => d.setEgressPolicy.allowedHosts);
  });
  return (
    <Section title="Egress policy">
      <p class="muted">The exact hosts an automation's ctx.fetch may reach (Enterprise); empty blocks every fetch.</p>
      <ErrorBanner error={q.error} />
      {q.data ? (
        <ActionForm action={save} submit="Save egress policy" done="Egress policy saved.">
          <TextArea label="Allowed hosts" name="allowedHosts" rows={3} defaultValue={q.data.join('\n')} placeholder={'api.example.com\nhooks.slack.com'} hint="One host per line." />
        </ActionForm>
      ) : null}
    </Section>
  );
}

export default function AutomationsPage() {
  const [, navigate] = useLocation();
  const [creating, setCreating] = useState(false);
  const list = usePaged((cursor) => gql(graphql(`query($cursor: String) { automations(limit: 50, cursor: $cursor) { items { id name status currentVersion createdAt updatedAt } nextCursor } }`), { cursor }).then((d) => d.automations), []);
  const create = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const d = await gql(graphql(`mutation($name: String, $code: String) { createAutomation(name: $name, code: $code) { id } }`), { name: formText(f, 'name'), code: formText(f, 'code') });
    navigate(`/automations/${d.createAutomation.id}`);
  });
  return (
    <Page
      title="Automations"
      actions={<CreateToggle open={creating} onToggle={setCreating} label="New automation" />}
    >
      {creating ? (
        <Section title="New automation">
          <ActionForm action={create} submit="Create automation">
            <Field label="Name" name="name" required placeholder="enrich-orders" />
            <TextArea label="Code" name="code" required rows={12} class="code-editor" defaultValue={EXAMPLE_CODE} hint="An ES module whose default export is (event, ctx) => result; it runs in a sandbox." />
          </ActionForm>
        </Section>
      ) : null}
      <PagedTable
        list={list}
        label="Automations"
        columns={['Name', 'Status', 'Version', 'Updated']}
        empty={
          <Empty title="No automations yet">
            <p>An automation is code in the event path: create one with “New automation”, then pin it as a webhook's transform (its Transform section).</p>
          </Empty>
        }
        row={(a) => <Row key={a.id} cells={[<Link href={`/automations/${a.id}`}>{a.name}</Link>, <Badge value={a.status} />, `v${a.currentVersion}`, <Time value={a.updatedAt} />]} />}
      />
      <EgressPolicy />
    </Page>
  );
}
