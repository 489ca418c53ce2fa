import { Prisma } from '../generated/prisma/client.ts';
import { DomainError, InvalidRequest, NotFound } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Runtime } from '../runtime.ts';
import { text } from './fields.ts';
import { idPage, type IdPage, type IdPageRequest } from './id-page.ts';
import { publishMessage } from './live.ts';
import { messageExists, readMessage, readMessagePage } from './message-reads.ts';
import { MESSAGE_INCLUDE, type MessageQuery, type MessageRow } from './rows.ts';
import { addReactions, MAX_ATTACHMENTS, parseAttachments, parseReactionAdditions, type Attachment, type Reactions } from './message-content.ts';

type Rt = Pick<Runtime, 'db' | 'pubsub'>;

function includeWith(query?: MessageQuery) {
  return { ...MESSAGE_INCLUDE, ...query?.include };
}

// A message's text may be long, but not without bound (the request body cap is 1 MB anyway).
const MAX_MESSAGE_LENGTH = 100_000;

function conversationNotFound(id: string) {
  return new DomainError(404, 'not_found', `No conversation with id ${id}.`, { param: 'conversation_id' });
}

export interface SendMessageInput {
  conversation_id?: unknown;
  message?: unknown;
  attachments?: unknown;
}

/**
 * Adds a message to a conversation. The message takes the conversation's contact, and that
 * contact's last_active_at becomes the message's created_at (never moving backwards when
 * messages race). One statement does both writes, so they commit together; the answer is then
 * read with the contact.
 */
export async function sendMessage(rt: Rt, projectId: string, input: SendMessageInput): Promise<MessageRow> {
  const conversationId = text(input.conversation_id, 'conversation_id', { required: true, max: 255 })!;
  const body = text(input.message, 'message', { required: true, max: MAX_MESSAGE_LENGTH })!;
  const attachments = parseAttachments(input.attachments);
  const id = newId('msg');
  // Columns are UTC wall time (timestamp without time zone); the ISO string's zone is dropped by the cast.
  const now = new Date().toISOString();
  const inserted = await rt.db.prisma.$queryRaw<Array<{ id: string }>>`
    WITH conversation AS (
      SELECT id, contact_id FROM conversations WHERE id = ${conversationId} AND project_id = ${projectId}
    ), touched AS (
      UPDATE contacts SET last_active_at = ${now}::timestamp(3)
      WHERE id = (SELECT contact_id FROM conversation) AND (last_active_at IS NULL OR last_active_at < ${now}::timestamp(3))
    )
    INSERT INTO messages (id, project_id, conversation_id, contact_id, body, reactions, attachments, created_at)
    SELECT ${id}, ${projectId}, id, contact_id, ${body}, '[]'::jsonb, ${JSON.stringify(attachments)}::jsonb, ${now}::timestamp(3)
    FROM conversation
    RETURNING id`;
  if (inserted.length === 0) throw conversationNotFound(conversationId);
  const row = await readMessage(rt, projectId, id);
  if (!row) throw new NotFound('message', id); // deleted in the meantime
  await publishMessage(rt, 'created', row);
  return row;
}

export async function getMessage(rt: Pick<Runtime, 'db'>, projectId: string, id: string): Promise<MessageRow> {
  const row = await readMessage(rt, projectId, id);
  if (!row) throw new NotFound('message', id);
  return row;
}

export interface MessageFilters {
  /** Restricts the list to one conversation; an unknown one simply matches nothing. */
  conversation_id?: string | null;
}

function messageWhere(projectId: string, filters: MessageFilters): Prisma.MessageWhereInput {
  return filters.conversation_id ? { projectId, conversationId: filters.conversation_id } : { projectId };
}

export async function listMessages(rt: Pick<Runtime, 'db'>, projectId: string, req: IdPageRequest & MessageFilters): Promise<IdPage<MessageRow>> {
  return idPage<MessageRow>(req, {
    exists: (id) => messageExists(rt, projectId, id),
    fetch: (beyond, order, take) => readMessagePage(rt, projectId, req.conversation_id, beyond, order, take),
  });
}

/** Newest first, for Relay connections: `query` carries the connection's take/skip/cursor. */
export async function findMessages(rt: Pick<Runtime, 'db'>, projectId: string, filters: MessageFilters, query: Omit<Prisma.MessageFindManyArgs, 'where' | 'orderBy'>) {
  return rt.db.prisma.message.findMany({ ...query, where: messageWhere(projectId, filters), orderBy: { id: 'desc' } });
}

export interface UpdateMessageInput {
  message?: unknown;
  reactions?: unknown;
  attachments?: unknown;
}

/**
 * `message` replaces the text, `reactions` adds people to reactions (each once, in order of first
 * use), `attachments` are appended. updated_at moves only when something actually changed.
 * The row is locked for the read-modify-write so concurrent reactions are all kept.
 */
export async function updateMessage(rt: Rt, projectId: string, id: string, input: UpdateMessageInput, query?: MessageQuery): Promise<MessageRow> {
  if (input.message === null) throw new InvalidRequest('message must be a string.', 'message');
  const body = text(input.message, 'message', { max: MAX_MESSAGE_LENGTH });
  const additions = parseReactionAdditions(input.reactions);
  const attachments = parseAttachments(input.attachments);
  const { row, changed } = await rt.db.prisma.$transaction(async (tx) => {
    const locked = await tx.$queryRaw<Array<{ body: string; reactions: unknown; attachments: unknown }>>`
      SELECT body, reactions, attachments FROM messages WHERE id = ${id} AND project_id = ${projectId} FOR UPDATE`;
    if (locked.length === 0) throw new NotFound('message', id);
    const current = locked[0];
    const data: Prisma.MessageUpdateInput = {};
    if (body !== undefined && body !== current.body) data.body = body;
    const merged = addReactions((current.reactions ?? []) as Reactions, additions);
    if (merged.changed) data.reactions = merged.reactions as unknown as Prisma.InputJsonValue;
    if (attachments.length > 0) {
      const all = [...((current.attachments ?? []) as Attachment[]), ...attachments];
      if (all.length > MAX_ATTACHMENTS) throw new InvalidRequest(`A message may carry at most ${MAX_ATTACHMENTS} attachments.`, 'attachments');
      data.attachments = all as unknown as Prisma.InputJsonValue;
    }
    const changed = Object.keys(data).length > 0;
    if (changed) data.updatedAt = new Date();
    const row = await tx.message.update({ where: { id }, data, include: includeWith(query) });
    return { row: row as MessageRow, changed };
  });
  if (changed) await publishMessage(rt, 'updated', row);
  return row;
}

/** Permanent. */
export async function deleteMessage(rt: Pick<Runtime, 'db'>, projectId: string, id: string) {
  const { count } = await rt.db.prisma.message.deleteMany({ where: { id, projectId } });
  if (count === 0) throw new NotFound('message', id);
  return { id, deleted: true as const };
}
