// The stored files of an event (form posts and emails): metadata, and how to fetch the bytes.
import { gql, session } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ErrorBanner, Section, Table, Time, useQuery } from '../ui.tsx';

function size(n: number) {
  return n >= 1048576 ? `${(n / 1048576).toFixed(1)} MB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KB` : `${n} B`;
}

export function EventFiles({ eventId }: { eventId: string }) {
  const q = useQuery(() => gql(graphql(`query($e: ID!) { eventFiles(eventId: $e) { id filename contentType size sha256 createdAt expiresAt } }`), { e: eventId }).then((d) => d.eventFiles), [eventId]);
  // Events other than form posts and emails have no files: the section only shows when there are some.
  if (!q.error && !q.data?.length) return null;
  return (
    <Section title="Files">
      <ErrorBanner error={q.error} />
      {q.data?.length ? (
        <>
          <Table
            label="Files of the event"
            columns={['File', 'Type', 'Size', 'SHA-256', 'Kept until']}
            items={q.data}
            row={(f) => (
              <tr key={f.id} data-file-id={f.id}>
                <td>
                  {f.filename} <code class="muted">{f.id}</code>
                </td>
                <td>{f.contentType}</td>
                <td>{size(f.size)}</td>
                <td>
                  <code title={f.sha256}>{f.sha256.slice(0, 16)}…</code>
                </td>
                <td>
                  <Time value={f.expiresAt} />
                </td>
              </tr>
            )}
          />
          <p class="muted">The delivered payload carries each file's signed link (fileRef.url). With an API key:</p>
          <pre class="code">{q.data.map((f) => `curl -OJ -H 'Authorization: Bearer <API key>' ${session.publicUrl}/v1/files/${f.id}`).join('\n')}</pre>
        </>
      ) : null}
    </Section>
  );
}
