import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey: key } = await app.project('free'));
});
afterAll(async () => {
  await app?.stop();
});

async function gql(query: string, variables: Record<string, unknown> = {}, apiKey = key) {
  const res = await app.api(apiKey, 'POST', '/graphql', { query, variables });
  return res.body as { data?: any; errors?: Array<{ message: string; extensions?: any }> };
}

describe('conversations over GraphQL', () => {
  it('runs every write as a mutation, with the same rules as REST', async () => {
    const created = await gql(`mutation { createContact(username: "gq", phone_number: "+1", display_name: "G Q") { id conversation_id display_name last_active_at } }`);
    const contact = created.data.createContact;
    expect(contact).toMatchObject({ id: expect.stringMatching(/^ct_/), conversation_id: expect.stringMatching(/^conv_/), display_name: 'G Q', last_active_at: null });

    const sent = await gql(
      `mutation($c: ID!, $a: JSON) { sendMessage(conversation_id: $c, message: "hi", attachments: $a) { id message attachments contact { id last_active_at } created_at } }`,
      { c: contact.conversation_id, a: [{ url: 'https://files.test/a', size: 5 }] },
    );
    const message = sent.data.sendMessage;
    expect(message.contact).toEqual({ id: contact.id, last_active_at: message.created_at });
    expect(message.attachments).toEqual([{ url: 'https://files.test/a', size: 5 }]);

    const updated = await gql(`mutation($id: ID!) { updateMessage(id: $id, reactions: {like: ["ana", "ana", "bo"]}) { reactions updated_at } }`, { id: message.id });
    expect(updated.data.updateMessage.reactions).toEqual([{ like: ['ana', 'bo'] }]);
    expect(updated.data.updateMessage.updated_at).toEqual(expect.any(Number));

    const renamed = await gql(`mutation($id: ID!) { updateContact(id: $id, display_name: null) { display_name username } }`, { id: contact.id });
    expect(renamed.data.updateContact).toEqual({ display_name: null, username: 'gq' });

    const bad = await gql(`mutation($c: ID!) { sendMessage(conversation_id: $c, message: "x", attachments: [{url: "ftp://x"}]) { id } }`, { c: contact.conversation_id });
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'invalid_request', param: 'attachments[0].url' });

    expect((await gql(`mutation($id: ID!) { deleteMessage(id: $id) { id deleted } }`, { id: message.id })).data.deleteMessage).toEqual({ id: message.id, deleted: true });
    expect((await gql(`mutation($id: ID!) { deleteContact(id: $id) { id deleted } }`, { id: contact.id })).data.deleteContact).toEqual({ id: contact.id, deleted: true });
    const gone = await gql(`query($id: ID!) { contact(id: $id) { id } }`, { id: contact.id });
    expect(gone.errors?.[0].extensions.code).toBe('not_found');
  });

  it('pages contacts and messages as Relay connections, newest first, in both directions', async () => {
    const { apiKey } = await app.project('free', 'relay');
    const contacts: any[] = [];
    for (let i = 0; i < 4; i++) contacts.push((await gql(`mutation { createContact(username: "r${i}", phone_number: "${i}") { id conversation_id } }`, {}, apiKey)).data.createContact);
    const messages: string[] = [];
    for (let i = 0; i < 5; i++) {
      const conv = contacts[i % 2].conversation_id;
      messages.push((await gql(`mutation($c: ID!) { sendMessage(conversation_id: $c, message: "m${i}") { id } }`, { c: conv }, apiKey)).data.sendMessage.id);
    }
    const page1 = (await gql(`{ contactsConnection(first: 3) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`, {}, apiKey)).data.contactsConnection;
    expect(page1.edges.map((e: any) => e.node.id)).toEqual([contacts[3].id, contacts[2].id, contacts[1].id]);
    expect(page1.pageInfo.hasNextPage).toBe(true);
    const page2 = (await gql(`query($a: String) { contactsConnection(first: 3, after: $a) { edges { node { id } } pageInfo { hasNextPage } } }`, { a: page1.pageInfo.endCursor }, apiKey)).data
      .contactsConnection;
    expect(page2.edges.map((e: any) => e.node.id)).toEqual([contacts[0].id]);
    expect(page2.pageInfo.hasNextPage).toBe(false);
    const last = (await gql(`{ contactsConnection(last: 2) { edges { node { id } } pageInfo { hasPreviousPage } } }`, {}, apiKey)).data.contactsConnection;
    expect(last.edges.map((e: any) => e.node.id)).toEqual([contacts[1].id, contacts[0].id]);
    const active = (await gql(`{ contactsConnection(active: true) { edges { node { id last_active_at } } } }`, {}, apiKey)).data.contactsConnection;
    expect(active.edges.map((e: any) => e.node.id)).toEqual([contacts[1].id, contacts[0].id]);

    const inOne = (
      await gql(`query($c: ID) { messagesConnection(conversationId: $c, first: 10) { edges { node { id conversation_id contact { id } } } } }`, { c: contacts[0].conversation_id }, apiKey)
    ).data.messagesConnection;
    expect(inOne.edges.map((e: any) => e.node.id)).toEqual([messages[4], messages[2], messages[0]]);
    expect(inOne.edges.every((e: any) => e.node.contact.id === contacts[0].id)).toBe(true);
    const all = (await gql(`{ messagesConnection(first: 2) { edges { node { id } } } messages(limit: 2) { has_more data { id } } }`, {}, apiKey)).data;
    expect(all.messagesConnection.edges.map((e: any) => e.node.id)).toEqual([messages[4], messages[3]]);
    expect(all.messages).toEqual({ has_more: true, data: [{ id: messages[4] }, { id: messages[3] }] });

    // another project sees none of it
    const theirs = (await gql(`{ contactsConnection { edges { node { id } } } messagesConnection { edges { node { id } } } }`)).data;
    const seen = [...theirs.contactsConnection.edges, ...theirs.messagesConnection.edges].map((e: any) => e.node.id);
    expect(seen.filter((id: string) => contacts.some((c) => c.id === id) || messages.includes(id))).toEqual([]);
  });
});
