// Email sender allowlist: the senders the email address takes (list, add, delete).
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, ConfirmButton, Empty, Field, PagedTable, Row, Section, Time, useAction, usePaged } from '../../ui.tsx';

interface AllowlistEntry {
  id: string;
  pattern: string;
  createdAt: string;
}

export function EmailAllowlist({ webhookId }: { webhookId: string }) {
  const list = usePaged<AllowlistEntry>(
    (cursor) =>
      gql(graphql(`query($id: ID!, $cursor: String) { webhookEmailAllowlist(id: $id, limit: 100, cursor: $cursor) { items { id pattern createdAt } nextCursor } }`), { id: webhookId, cursor }).then(
        (d) => d.webhookEmailAllowlist,
      ),
    [webhookId],
  );
  const add = useAction(async (form: HTMLFormElement) => {
    const pattern = String(new FormData(form).get('pattern') ?? '').trim();
    await gql(graphql(`mutation($id: ID!, $pattern: String!) { addEmailAllowlistEntry(id: $id, pattern: $pattern) { id } }`), { id: webhookId, pattern });
    form.reset();
    list.reload();
  });
  const remove = useAction(async (entryId: string) => {
    await gql(graphql(`mutation($id: ID!, $entryId: ID!) { deleteEmailAllowlistEntry(id: $id, entryId: $entryId) { id deleted } }`), { id: webhookId, entryId });
    list.reload();
  });
  return (
    <Section title="Email sender allowlist">
      <p class="muted">
        Senders the email address takes, matched case-insensitively against the From: address (else MAIL FROM): an address (ana@example.com), a domain (example.com, not its subdomains) or a local part on any domain
        (alerts@*). Empty: every sender. Mail from any other sender is accepted and dropped. Changes need Starter and above.
      </p>
      <PagedTable
        list={list}
        error={remove.error}
        label="Sender patterns"
        columns={['Pattern', 'Added']}
        actions
        empty={<Empty title="No sender patterns">Every sender is taken. Add a pattern to take only those senders.</Empty>}
        row={(e) => (
          <Row key={e.id} data-entry-id={e.id} cells={[<code>{e.pattern}</code>, <Time value={e.createdAt} />, <ConfirmButton label="Delete" danger small title={`Remove sender pattern ${e.pattern}?`} body="The next mail sees the change." onConfirm={() => remove.call(e.id)} />]} />
        )}
      />
      <ActionForm action={add} submit="Add sender">
        <div class="row">
          <Field label="Sender pattern" name="pattern" required maxLength={254} autoComplete="off" placeholder="alerts@example.com" hint="At most 254 characters, no spaces, at most one @." />
        </div>
      </ActionForm>
    </Section>
  );
}
