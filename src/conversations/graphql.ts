import { builder } from '../graphql/builder.ts';
import { createContact, deleteContact, findContacts, getContact, listContacts, updateContact } from './contacts.ts';
import { subscribeMessages, type MessageEvent } from './live.ts';
import { deleteMessage, findMessages, getMessage, listMessages, sendMessage, updateMessage } from './messages.ts';
import { CONTACT_INCLUDE, MESSAGE_INCLUDE, type ContactRow, type MessageRow } from './rows.ts';

// Field names are the spec's (snake_case), so the REST answers SOFA builds from them match it.

export const MessageContactRef = builder.prismaObject('Contact', {
  variant: 'MessageContact',
  description: "A message's contact, as embedded in the message (no display_name or conversation_id).",
  fields: (t) => ({
    id: t.exposeID('id'),
    username: t.exposeString('username'),
    phone_number: t.exposeString('phoneNumber'),
    avatar_url: t.exposeString('avatarUrl', { nullable: true }),
    last_active_at: t.expose('lastActiveAt', { type: 'UnixTime', nullable: true }),
    created_at: t.expose('createdAt', { type: 'UnixTime' }),
  }),
});

export const ContactRef = builder.prismaObject('Contact', {
  description: 'A contact; it has exactly one conversation.',
  // Every contact is loaded with its conversation's id, so conversation_id is a plain field (as
  // Message.contact): list rows from plain SQL resolve without Prisma's selection tracking.
  include: CONTACT_INCLUDE,
  fields: (t) => ({
    id: t.exposeID('id'),
    username: t.exposeString('username'),
    phone_number: t.exposeString('phoneNumber'),
    avatar_url: t.exposeString('avatarUrl', { nullable: true }),
    display_name: t.exposeString('displayName', { nullable: true, description: 'Null unless set; clients show the username instead.' }),
    conversation_id: t.id({ resolve: (contact) => contact.conversation!.id }),
    last_active_at: t.expose('lastActiveAt', {
      type: 'UnixTime',
      nullable: true,
      description: 'created_at of the latest message in the conversation; null until then.',
    }),
    created_at: t.expose('createdAt', { type: 'UnixTime' }),
  }),
});

export const MessageRef = builder.prismaObject('Message', {
  description: 'A message in the conversation with a contact.',
  // Every message is loaded with its contact (one join in the list and get reads, Prisma's include
  // elsewhere), so `contact` is a plain field: rows from plain SQL resolve without Prisma's
  // per-field selection tracking, and a subscriber's event needs no reload.
  include: MESSAGE_INCLUDE,
  fields: (t) => ({
    id: t.exposeID('id'),
    conversation_id: t.exposeID('conversationId'),
    contact: t.field({ type: MessageContactRef, resolve: (message) => message.contact }),
    message: t.exposeString('body'),
    reactions: t.expose('reactions', { type: 'JSON', description: 'One object per reaction name, in order of first use: [{"like":["ana","bo"]}].' }),
    attachments: t.expose('attachments', { type: 'JSON', description: 'Attachment objects: url, and optionally type, name, size (bytes).' }),
    read_at: t.expose('readAt', { type: 'UnixTime', nullable: true }),
    created_at: t.expose('createdAt', { type: 'UnixTime' }),
    updated_at: t.expose('updatedAt', { type: 'UnixTime', nullable: true }),
  }),
});

const ContactListRef = builder.objectRef<{ has_more: boolean; data: ContactRow[] }>('ContactList').implement({
  description: 'A page of contacts, newest first.',
  fields: (t) => ({
    has_more: t.exposeBoolean('has_more'),
    data: t.field({ type: [ContactRef], resolve: (page) => page.data }),
  }),
});

const MessageListRef = builder.objectRef<{ has_more: boolean; data: MessageRow[] }>('MessageList').implement({
  description: 'A page of messages, newest first.',
  fields: (t) => ({
    has_more: t.exposeBoolean('has_more'),
    data: t.field({ type: [MessageRef], resolve: (page) => page.data }),
  }),
});

const DeletedRef = builder.objectRef<{ id: string; deleted: true }>('DeletedObject').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    deleted: t.exposeBoolean('deleted'),
  }),
});

const pageArgs = builder.args((t) => ({
  limit: t.int({ description: 'Page size, 1..100 (default 10).' }),
  starting_after: t.id({ description: 'Id of the last item of the previous page: the next page.' }),
  ending_before: t.id({ description: 'Id of the first item of the current page: the page before it.' }),
}));

// ---------------------------------------------------------------- contacts

builder.queryField('contacts', (t) =>
  t.field({
    type: ContactListRef,
    description: 'Contacts, newest first (REST: GET /v1/contacts).',
    args: {
      ...pageArgs,
      active: t.arg.boolean({ description: 'true: contacts with a last_active_at; false: those without.' }),
    },
    resolve: (_root, args, ctx) => listContacts(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.queryField('contact', (t) =>
  t.prismaField({
    type: ContactRef,
    description: 'One contact.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, args, ctx) => getContact(ctx.rt, ctx.auth.projectId, String(args.id), query),
  }),
);

builder.queryField('contactsConnection', (t) =>
  t.prismaConnection({
    type: ContactRef,
    cursor: 'id',
    description: 'Contacts, newest first, as a Relay connection.',
    args: { active: t.arg.boolean() },
    resolve: (query, _root, args, ctx) => findContacts(ctx.rt, ctx.auth.projectId, { active: args.active }, query),
  }),
);

builder.mutationField('createContact', (t) =>
  t.prismaField({
    type: ContactRef,
    description: 'Creates a contact and its conversation.',
    args: {
      username: t.arg.string({ required: true }),
      phone_number: t.arg.string({ required: true }),
      avatar_url: t.arg.string(),
      display_name: t.arg.string(),
    },
    resolve: (query, _root, args, ctx) => createContact(ctx.rt, ctx.auth.projectId, args, query),
  }),
);

builder.mutationField('updateContact', (t) =>
  t.prismaField({
    type: ContactRef,
    description: 'Changes a contact. display_name is the only attribute that changes; null clears it.',
    args: { id: t.arg.id({ required: true }), display_name: t.arg.string() },
    resolve: (query, _root, args, ctx) => updateContact(ctx.rt, ctx.auth.projectId, String(args.id), args, query),
  }),
);

builder.mutationField('deleteContact', (t) =>
  t.field({
    type: DeletedRef,
    description: 'Deletes the contact, its conversation and the messages in it.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteContact(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

// ---------------------------------------------------------------- messages

builder.queryField('messages', (t) =>
  t.field({
    type: MessageListRef,
    description: 'Messages, newest first (REST: GET /v1/messages).',
    args: {
      conversation_id: t.arg.id({ description: 'Only the messages of this conversation.' }),
      ...pageArgs,
    },
    resolve: (_root, args, ctx) => listMessages(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.queryField('message', (t) =>
  t.field({
    type: MessageRef,
    description: 'One message.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => getMessage(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.queryField('messagesConnection', (t) =>
  t.prismaConnection({
    type: MessageRef,
    cursor: 'id',
    description: 'Messages, newest first, as a Relay connection.',
    args: { conversationId: t.arg.id({ description: 'Only the messages of this conversation.' }) },
    resolve: (query, _root, args, ctx) =>
      findMessages(ctx.rt, ctx.auth.projectId, { conversation_id: args.conversationId ? String(args.conversationId) : null }, query),
  }),
);

builder.mutationField('sendMessage', (t) =>
  t.field({
    type: MessageRef,
    description: "Adds a message to a conversation; the contact's last_active_at becomes its created_at.",
    args: {
      conversation_id: t.arg.id({ required: true }),
      message: t.arg.string({ required: true }),
      attachments: t.arg({ type: 'JSON', description: 'Array of attachment objects: url (http/https), and optionally type, name, size.' }),
    },
    resolve: (_root, args, ctx) => sendMessage(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.mutationField('updateMessage', (t) =>
  t.prismaField({
    type: MessageRef,
    description: 'Changes a message. message replaces the text; reactions ({"like":["ana"]}) adds people to reactions; attachments are appended. Any change sets updated_at.',
    args: {
      id: t.arg.id({ required: true }),
      message: t.arg.string({ description: 'The new text.' }),
      reactions: t.arg({ type: 'JSON', description: 'People to add, by reaction name: {"like":["ana","bo"]} (form: reactions[like][]=ana).' }),
      attachments: t.arg({ type: 'JSON', description: 'Attachment objects to append: url (http/https), and optionally type, name, size.' }),
    },
    resolve: (query, _root, args, ctx) => updateMessage(ctx.rt, ctx.auth.projectId, String(args.id), args, query),
  }),
);

builder.mutationField('deleteMessage', (t) =>
  t.field({
    type: DeletedRef,
    description: 'Deletes the message permanently.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteMessage(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

// ---------------------------------------------------------------- live

function messageSubscription(event: MessageEvent) {
  return builder.subscriptionField(event === 'created' ? 'messageCreated' : 'messageUpdated', (t) =>
    t.field({
      type: MessageRef,
      nullable: true,
      description: `Messages ${event} in one conversation, or in every conversation of the project when conversationId is left out.`,
      args: { conversationId: t.arg.id() },
      subscribe: (_root, args, ctx) => subscribeMessages(ctx.rt, ctx.auth.projectId, event, args.conversationId ? String(args.conversationId) : null),
      // The event carries the whole row with its contact, so nothing is loaded per subscriber.
      resolve: (row) => row as unknown as MessageRow,
    }),
  );
}
messageSubscription('created');
messageSubscription('updated');
