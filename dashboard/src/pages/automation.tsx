// One automation: its current code, adding a version, status (active/disabled), delete, the
// versions and the runs (status, CPU time, subrequests, logs, error).
import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ActionForm, Badge, Code, ConfirmButton, Empty, ErrorBanner, Field, Loading, LoadMore, Page, PagedTable, RefreshButton, Row, Section, TextArea, Time, useAction, usePaged, useQuery } from '../ui.tsx';

function Versions({ id, current, onAdded }: { id: string; current: number; onAdded: () => void }) {
  const versions = usePaged((cursor) => gql(graphql(`query($id: ID!, $cursor: String) { automationVersions(id: $id, limit: 20, cursor: $cursor) { items { version code codeSha256 createdAt } nextCursor } }`), { id, cursor }).then((d) => d.automationVersions), [id, current]);
  const [added, setAdded] = useState<number>();
  const add = useAction(async (form: HTMLFormElement) => {
    const d = await gql(graphql(`mutation($id: ID!, $code: String) { createAutomationVersion(id: $id, code: $code) { version } }`), { id, code: String(new FormData(form).get('code') ?? '') || undefined });
    setAdded(d.createAutomationVersion.version);
    onAdded();
  });
  const latest = versions.items.find((v) => v.version === current);
  return (
    <>
      <Section title="Code">
        {versions.loading && !latest ? <Loading /> : null}
        {latest ? (
          <ActionForm action={add} submit="Add version" done={added ? `Version ${added} added.` : undefined} formKey={String(latest.version)}>
            <TextArea label={`Code (editing v${latest.version}; saving adds a version)`} name="code" rows={16} class="code-editor" defaultValue={latest.code} hint="Versions are immutable: webhooks that pin an older version keep running it." />
          </ActionForm>
        ) : null}
      </Section>
      <Section title="Versions">
        <ErrorBanner error={versions.error} />
        <ul class="list stack">
          {versions.items.map((v) => (
            <li key={v.version}>
              <details>
                <summary>
                  v{v.version} · <Time value={v.createdAt} /> · <code title="sha256 of the code">{v.codeSha256.slice(0, 12)}</code>
                  {v.version === current ? ' · current' : ''}
                </summary>
                <Code>{v.code}</Code>
              </details>
            </li>
          ))}
        </ul>
        <LoadMore cursor={versions.cursor} onMore={() => void versions.loadMore()} pending={versions.pending} />
      </Section>
    </>
  );
}

function Runs({ id }: { id: string }) {
  const runs = usePaged((cursor) => gql(graphql(`query($id: ID!, $cursor: String) { automationRuns(id: $id, limit: 20, cursor: $cursor) { items { id version status cpuMs subrequests logs logsTruncated error deliveryId createdAt } nextCursor } }`), { id, cursor }).then((d) => d.automationRuns), [id]);
  return (
    <Section title="Runs" actions={<RefreshButton list={runs} />}>
      <PagedTable
        list={runs}
        label="Runs"
        columns={['When', 'Version', 'Status', 'CPU', 'Subrequests', 'Delivery', 'Logs and error']}
        empty={<Empty title="No runs yet">A run is recorded each time a delivery (or a test delivery) of a webhook that pins this automation runs it.</Empty>}
        row={(r) => (
          <Row
            key={r.id}
            data-run-id={r.id}
            cells={[
              <Time value={r.createdAt} />,
              `v${r.version}`,
              <Badge value={r.status} />,
              `${r.cpuMs.toFixed(1)} ms`,
              r.subrequests,
              r.deliveryId ? <Link href={`/deliveries/${r.deliveryId}`}>{r.deliveryId}</Link> : <span class="muted">test delivery</span>,
              <>
                {r.error ? <p class="error-text">{r.error}</p> : null}
                {r.logs ? (
                  <details>
                    <summary>Logs{r.logsTruncated ? ' (cut at the log limit)' : ''}</summary>
                    <Code>{r.logs}</Code>
                  </details>
                ) : (
                  <span class="muted">no logs</span>
                )}
              </>,
            ]}
          />
        )}
      />
    </Section>
  );
}

export default function AutomationPage({ params }: { params: Record<string, string | undefined> }) {
  const id = params.id!;
  const [, navigate] = useLocation();
  const q = useQuery(() => gql(graphql(`query($id: ID!) { automation(id: $id) { id name status currentVersion createdAt updatedAt } }`), { id }).then((d) => d.automation), [id]);
  const update = useAction(async (vars: { name?: string; status?: string }) => {
    const d = await gql(graphql(`mutation($id: ID!, $name: String, $status: String) { updateAutomation(id: $id, name: $name, status: $status) { id name status currentVersion createdAt updatedAt } }`), { id, ...vars });
    q.setData(() => d.updateAutomation);
  });
  const remove = useAction(async () => {
    await gql(graphql(`mutation($id: ID!) { deleteAutomation(id: $id) { id } }`), { id });
    navigate('/automations');
  });
  if (q.error)
    return (
      <Page title="Automation">
        <ErrorBanner error={q.error} />
        <Link href="/automations">Back to automations</Link>
      </Page>
    );
  const a = q.data;
  if (!a) return <Loading />;
  const active = a.status === 'active';
  return (
    <Page
      title={a.name}
      actions={
        <>
          <Badge value={a.status} />
          <button type="button" onClick={() => void update.call({ status: active ? 'disabled' : 'active' })} disabled={update.pending}>
            {active ? 'Disable' : 'Enable'}
          </button>
          <ConfirmButton label="Delete" danger title={`Delete automation “${a.name}”?`} body="Its versions and runs are deleted too. A webhook whose transform pins it must be changed first." confirmText={a.name} confirmLabel="Delete forever" onConfirm={() => remove.call()} />
        </>
      }
    >
      <ErrorBanner error={update.error ?? remove.error} />
      {!active ? (
        <p class="error-banner" role="status">
          Disabled: deliveries of webhooks that pin it fail until it is enabled again.
        </p>
      ) : null}
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          const name = String(new FormData(e.currentTarget).get('name') ?? '').trim();
          if (name && name !== a.name) void update.call({ name });
        }}
      >
        <Field label="Name" name="name" defaultValue={a.name} key={a.name} required />
        <button type="submit" disabled={update.pending}>
          Rename
        </button>
      </form>
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{a.id}</code>
        </dd>
        <dt>Current version</dt>
        <dd>v{a.currentVersion}</dd>
        <dt>Created</dt>
        <dd>
          <Time value={a.createdAt} />
        </dd>
      </dl>
      <Versions id={id} current={a.currentVersion} onAdded={q.reload} />
      <Runs id={id} />
    </Page>
  );
}
