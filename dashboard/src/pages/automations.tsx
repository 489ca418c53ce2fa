// Automations (CONTRACT §10): the list, creating one (name and code), and the egress policy
// (Enterprise). One automation's code, versions and runs: pages/automation.tsx.
import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { Badge, Empty, ErrorBanner, Field, Loading, LoadMore, Page, Section, TextArea, Time, useAction, usePaged, useQuery, formText } from '../ui.tsx';

export const EXAMPLE_CODE = `// The event in, the payload to deliver out (null: do not deliver).
export default async function (event, ctx) {
  console.log('type', event.body?.type);
  return { ...event.body, receivedAt: new Date().toISOString() };
}
`;

function EgressPolicy() {
  const q = useQuery(() => gql(graphql(`{ egressPolicy { allowedHosts } }`)).then((d) => d.egressPolicy.allowedHosts as string[]), []);
  const [saved, setSaved] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const text = String(new FormData(form).get('allowedHosts') ?? '');
    const hosts = text.split(/[\s,]+/).filter(Boolean);
    const d = await gql(graphql(`mutation($h: [String!]) { setEgressPolicy(allowedHosts: $h) { allowedHosts } }`), { h: hosts });
    q.setData(() => d.setEgressPolicy.allowedHosts);
    setSaved(true);
  });
  return (
    <Section title="Egress policy">
      <p class="muted">The exact hosts an automation's ctx.fetch may reach (Enterprise); empty blocks every fetch.</p>
      <ErrorBanner error={q.error} />
      {q.data ? (
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            setSaved(false);
            void save.call(e.currentTarget);
          }}
        >
          <TextArea label="Allowed hosts" name="allowedHosts" rows={3} defaultValue={q.data.join('\n')} placeholder={'api.example.com\nhooks.slack.com'} hint="One host per line." />
          <ErrorBanner error={save.error} />
          {saved ? (
            <p class="success-banner" role="status">
              Egress policy saved.
            </p>
          ) : null}
          <div class="row">
            <button type="submit" class="primary" disabled={save.pending}>
              Save egress policy
            </button>
          </div>
        </form>
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
      actions={
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          {creating ? 'Close' : 'New automation'}
        </button>
      }
    >
      {creating ? (
        <Section title="New automation">
          <form
            class="stack"
            onSubmit={(e) => {
              e.preventDefault();
              void create.call(e.currentTarget);
            }}
          >
            <Field label="Name" name="name" required placeholder="enrich-orders" />
            <TextArea label="Code" name="code" required rows={12} class="code-editor" defaultValue={EXAMPLE_CODE} hint="An ES module whose default export is (event, ctx) => result; it runs in a sandbox." />
            <ErrorBanner error={create.error} />
            <div class="row">
              <button type="submit" class="primary" disabled={create.pending}>
                Create automation
              </button>
            </div>
          </form>
        </Section>
      ) : null}
      <ErrorBanner error={list.error} />
      {list.loading && !list.items.length ? <Loading /> : null}
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No automations yet">
          <p>An automation is code in the event path: create one with “New automation”, then pin it as a webhook's transform (its Transform section).</p>
        </Empty>
      ) : null}
      {list.items.length ? (
        <div class="table-wrap">
          <table aria-label="Automations">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Version</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((a: any) => (
                <tr key={a.id}>
                  <td>
                    <Link href={`/automations/${a.id}`}>{a.name}</Link>
                  </td>
                  <td>
                    <Badge value={a.status} />
                  </td>
                  <td>v{a.currentVersion}</td>
                  <td>
                    <Time value={a.updatedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <LoadMore cursor={list.cursor} onMore={() => void list.loadMore()} pending={list.pending} />
      <EgressPolicy />
    </Page>
  );
}
