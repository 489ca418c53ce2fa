// Conversations: contacts, and one contact's conversation with messages arriving live
// (messageCreated / messageUpdated over graphql-ws); send a message, react to one.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { gql, session, subscribe } from '../api.ts';
import { graphql, type ResultOf, toJson, json } from '../graphql.ts';
import { ActionForm, ConfirmButton, Empty, ErrorBanner, Field, formText, Loading, Page, Section, Time, useAction, useQuery } from '../ui.tsx';

const MESSAGE = graphql(`fragment MessageFields on Message @_unmask { id conversation_id message reactions attachments created_at updated_at contact { id username } }`);
/** A message with its JSON fields read as their shapes. */
function asMessage(m: ResultOf<typeof MESSAGE>): Message {
  return { ...m, reactions: json(m.reactions), attachments: json(m.attachments) };
}

const REACTIONS = ['like', 'love', 'laugh'];

/** A message as the fragment reads it, with the shapes of its two JSON fields. */
type Message = Omit<ResultOf<typeof MESSAGE>, 'reactions' | 'attachments'> & {
  reactions: Record<string, string[]>[];
  attachments: { url: string; name?: string }[];
};

function Contacts({ current, version }: { current?: string; version: number }) {
  const [pages, setPages] = useState<string[]>([]);
  const q = useQuery(() => gql(graphql(`query($after: ID) { contacts(limit: 100, starting_after: $after) { data { id username display_name phone_number last_active_at conversation_id } has_more } }`), { after: pages.at(-1) }), [pages.length, version]);
  const create = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    await gql(graphql(`mutation($u: String!, $p: String!, $d: String) { createContact(username: $u, phone_number: $p, display_name: $d) { id } }`), { u: formText(f, 'username') ?? '', p: formText(f, 'phone_number') ?? '', d: formText(f, 'display_name') });
    form.reset();
    q.reload();
  });
  const contacts = q.data?.contacts.data ?? [];
  return (
    <Section title="Contacts">
      <ErrorBanner error={q.error} />
      {q.loading && !contacts.length ? <Loading /> : null}
      {!q.loading && !q.error && contacts.length === 0 ? <p class="muted">No contacts yet. Add one below, or with the API (POST /v1/contacts).</p> : null}
      <ul class="list" aria-label="Contacts">
        {contacts.map((c) => (
          <li key={c.id}>
            <Link href={`/conversations/${c.id}`} aria-current={c.id === current ? 'true' : undefined}>
              <strong>{c.display_name || c.username}</strong>
              <div class="muted">
                @{c.username} · {c.phone_number}
              </div>
            </Link>
          </li>
        ))}
      </ul>
      {q.data?.contacts.has_more ? (
        <button type="button" onClick={() => setPages([...pages, contacts.at(-1)!.id])}>
          Next contacts
        </button>
      ) : null}
      {pages.length ? (
        <button type="button" onClick={() => setPages([])}>
          First contacts
        </button>
      ) : null}
      <details>
        <summary>Add a contact</summary>
        <ActionForm action={create} submit="Add contact">
          <Field label="Username" name="username" required />
          <Field label="Phone number" name="phone_number" required placeholder="+15551234567" />
          <Field label="Display name" name="display_name" />
        </ActionForm>
      </details>
    </Section>
  );
}

function Conversation({ contactId, onContactsChanged }: { contactId: string; onContactsChanged: () => void }) {
  const q = useQuery(async () => {
    const { contact } = await gql(graphql(`query($id: ID!) { contact(id: $id) { id username display_name conversation_id } }`), { id: contactId });
    const { messages } = await gql(graphql(`query($c: ID!) { messages(conversation_id: $c, limit: 100) { data { ...MessageFields } has_more } }`, [MESSAGE]), { c: contact.conversation_id });
    return { contact, messages: messages.data.map(asMessage).reverse(), hasMore: messages.has_more };
  }, [contactId]);
  const conversationId: string | undefined = q.data?.contact.conversation_id;
  const [live, setLive] = useState(false);
  const bottom = useRef<HTMLLIElement>(null);
  useEffect(() => {
    if (!conversationId) return;
    const upsert = (m: Message | null) => {
      if (!m) return;
      q.setData((d) => (d ? { ...d, messages: d.messages.some((x) => x.id === m.id) ? d.messages.map((x) => (x.id === m.id ? m : x)) : [...d.messages, m] } : d));
    };
    setLive(true);
    const stopCreated = subscribe(graphql(`subscription($c: ID) { messageCreated(conversationId: $c) { ...MessageFields } }`, [MESSAGE]), { c: conversationId }, (d) => upsert(d.messageCreated && asMessage(d.messageCreated)));
    const stopUpdated = subscribe(graphql(`subscription($c: ID) { messageUpdated(conversationId: $c) { ...MessageFields } }`, [MESSAGE]), { c: conversationId }, (d) => upsert(d.messageUpdated && asMessage(d.messageUpdated)));
    return () => {
      stopCreated();
      stopUpdated();
      setLive(false);
    };
  }, [conversationId]);
  useEffect(() => bottom.current?.scrollIntoView({ block: 'nearest' }), [q.data?.messages.length]);
  const send = useAction(async (form: HTMLFormElement) => {
    const text = String(new FormData(form).get('message') ?? '').trim();
    if (!text) return;
    await gql(graphql(`mutation($c: ID!, $m: String!) { sendMessage(conversation_id: $c, message: $m) { id } }`), { c: conversationId!, m: text });
    form.reset();
  });
  const react = useAction(async (id: string, reaction: string) => {
    await gql(graphql(`mutation($id: ID!, $r: JSON) { updateMessage(id: $id, reactions: $r) { id } }`), { id, r: toJson({ [reaction]: [session.email] }) });
  });
  const [, navigate] = useLocation();
  const rename = useAction(async (form: HTMLFormElement) => {
    const name = String(new FormData(form).get('display_name') ?? '').trim();
    const d = await gql(graphql(`mutation($id: ID!, $d: String) { updateContact(id: $id, display_name: $d) { id username display_name conversation_id } }`), { id: contactId, d: name || null });
    q.setData((prev) => (prev ? { ...prev, contact: d.updateContact } : prev));
    onContactsChanged();
  });
  const removeContact = useAction(async () => {
    await gql(graphql(`mutation($id: ID!) { deleteContact(id: $id) { id } }`), { id: contactId });
    onContactsChanged();
    navigate('/conversations');
  });
  const removeMessage = useAction(async (id: string) => {
    await gql(graphql(`mutation($id: ID!) { deleteMessage(id: $id) { id } }`), { id });
    q.setData((prev) => (prev ? { ...prev, messages: prev.messages.filter((m) => m.id !== id) } : prev));
  });
  if (q.error) return <ErrorBanner error={q.error} />;
  if (!q.data) return <Loading />;
  const c = q.data.contact;
  return (
    <Section title={`Conversation with ${c.display_name || c.username}`} actions={<span class={`live ${live ? '' : 'off'}`}>{live ? 'Live' : 'Not live'}</span>}>
      {q.data.messages.length === 0 ? <p class="muted">No messages yet. Send the first one below.</p> : null}
      {q.data.hasMore ? <p class="muted">Showing the latest 100 messages.</p> : null}
      <ol class="messages" aria-label="Messages" aria-live="polite">
        {q.data.messages.map((m) => (
          <li key={m.id} class="message" data-message-id={m.id}>
            <div class="muted">
              <Time value={m.created_at} />
              {m.updated_at ? ' · edited' : ''}
            </div>
            <div>{m.message}</div>
            {m.attachments.length ? (
              <ul>
                {m.attachments.map((a) => (
                  <li key={a.url}>
                    <a href={a.url} rel="noopener noreferrer" target="_blank">
                      {a.name ?? a.url}
                    </a>
                  </li>
                ))}
              </ul>
            ) : null}
            <div class="reactions">
              {m.reactions.map((r) =>
                Object.entries(r).map(([name, people]) => (
                  <span key={name} class="badge tone-info" title={people.join(', ')}>
                    {name} {people.length}
                  </span>
                )),
              )}
              <ConfirmButton label="Delete" title="Delete this message?" body="It is removed for good." danger onConfirm={() => removeMessage.call(m.id)} />
              {REACTIONS.map((r) => (
                <button key={r} type="button" class="small" onClick={() => react.call(m.id, r)} aria-label={`React ${r} to this message`}>
                  +{r}
                </button>
              ))}
            </div>
          </li>
        ))}
        <li ref={bottom} aria-hidden="true" />
      </ol>
      <ActionForm action={send} submit="Send" class="row">
        <Field label="Message" name="message" autoComplete="off" required />
      </ActionForm>
      <ErrorBanner error={react.error ?? removeMessage.error} />
      <details>
        <summary>Contact settings</summary>
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            void rename.call(e.currentTarget);
          }}
        >
          <Field label="Display name" name="display_name" defaultValue={c.display_name ?? ''} />
          <button type="submit" disabled={rename.pending}>
            Save name
          </button>
          <ConfirmButton label="Delete contact" danger title={`Delete ${c.display_name || c.username}?`} body="The contact, their conversation and its messages are deleted for good." onConfirm={() => removeContact.call()} />
        </form>
        <ErrorBanner error={rename.error ?? removeContact.error} />
      </details>
    </Section>
  );
}

export default function ConversationsPage({ params }: { params: Record<string, string | undefined> }) {
  const [version, setVersion] = useState(0);
  return (
    <Page title="Conversations">
      <div class="split">
        <Contacts current={params.contactId} version={version} />
        {params.contactId ? (
          <Conversation key={params.contactId} contactId={params.contactId} onContactsChanged={() => setVersion((v) => v + 1)} />
        ) : (
          <Empty title="Pick a contact">
            <p>Choose a contact to see their conversation; new messages appear as they are sent.</p>
          </Empty>
        )}
      </div>
    </Page>
  );
}
