import type { QueryConfig } from 'pg';
import type { Runtime } from '../runtime.ts';
import type { MessageRow } from './rows.ts';

/**
 * Message reads in one SQL round trip: each message joined with its contact, on the plain pg pool.
 * Lists are the API's hottest reads; Prisma would load the contacts with a second query and
 * spend more CPU mapping both than the database spends answering them. Rows come out in the
 * exact shape Prisma gives with `include: { contact: true }` (MessageRow).
 */

const COLUMNS = `m.id, m.project_id, m.conversation_id, m.contact_id, m.body, m.reactions, m.attachments, m.read_at,
  m.created_at, m.updated_at, c.project_id AS c_project_id, c.username AS c_username, c.phone_number AS c_phone_number,
  c.avatar_url AS c_avatar_url, c.display_name AS c_display_name, c.last_active_at AS c_last_active_at, c.created_at AS c_created_at`;

interface JoinedRow {
  id: string;
  project_id: string;
  conversation_id: string;
  contact_id: string;
  body: string;
  reactions: MessageRow['reactions'];
  attachments: MessageRow['attachments'];
  read_at: Date | null;
  created_at: Date;
  updated_at: Date | null;
  c_project_id: string;
  c_username: string;
  c_phone_number: string;
  c_avatar_url: string | null;
  c_display_name: string | null;
  c_last_active_at: Date | null;
  c_created_at: Date;
}

function toMessageRow(r: JoinedRow): MessageRow {
  return {
    id: r.id,
    projectId: r.project_id,
    conversationId: r.conversation_id,
    contactId: r.contact_id,
    body: r.body,
    reactions: r.reactions,
    attachments: r.attachments,
    readAt: r.read_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    contact: {
      id: r.contact_id,
      projectId: r.c_project_id,
      username: r.c_username,
      phoneNumber: r.c_phone_number,
      avatarUrl: r.c_avatar_url,
      displayName: r.c_display_name,
      lastActiveAt: r.c_last_active_at,
      createdAt: r.c_created_at,
    },
  };
}

/** One message of the project, with its contact; null when there is none. */
const BY_ID: Pick<QueryConfig, 'name' | 'text'> = {
  name: 'message_by_id',
  text: `SELECT ${COLUMNS} FROM messages m JOIN contacts c ON c.id = m.contact_id WHERE m.id = $1 AND m.project_id = $2`,
};

export async function readMessage(rt: Pick<Runtime, 'db'>, projectId: string, id: string): Promise<MessageRow | null> {
  const { rows } = await rt.db.pool.query<JoinedRow>({ ...BY_ID, values: [id, projectId] });
  return rows.length > 0 ? toMessageRow(rows[0]) : null;
}

export async function messageExists(rt: Pick<Runtime, 'db'>, projectId: string, id: string): Promise<boolean> {
  const { rowCount } = await rt.db.pool.query({ name: 'message_exists', text: 'SELECT 1 FROM messages WHERE id = $1 AND project_id = $2', values: [id, projectId] });
  return (rowCount ?? 0) > 0;
}

// One prepared statement per shape of page query (filter × direction), so each is planned once
// per connection and always has its index: (project_id, id) or (conversation_id, id).
const pageStatements = new Map<string, Pick<QueryConfig, 'name' | 'text'>>();

function pageStatement(byConversation: boolean, beyond: 'lt' | 'gt' | undefined, order: 'asc' | 'desc') {
  const key = `${byConversation ? 'conv' : 'proj'}_${beyond ?? 'all'}_${order}`;
  let statement = pageStatements.get(key);
  if (!statement) {
    const where = ['m.project_id = $1'];
    if (byConversation) where.push('m.conversation_id = $3');
    if (beyond) where.push(`m.id ${beyond === 'lt' ? '<' : '>'} $${byConversation ? 4 : 3}`);
    statement = {
      name: `messages_page_${key}`,
      text: `SELECT ${COLUMNS} FROM messages m JOIN contacts c ON c.id = m.contact_id
        WHERE ${where.join(' AND ')} ORDER BY m.id ${order.toUpperCase()} LIMIT $2`,
    };
    pageStatements.set(key, statement);
  }
  return statement;
}

/** Up to `take` messages of the project (or of one conversation), by id in `order`, beyond a cursor id. */
export async function readMessagePage(
  rt: Pick<Runtime, 'db'>,
  projectId: string,
  conversationId: string | null | undefined,
  beyond: { lt?: string; gt?: string },
  order: 'asc' | 'desc',
  take: number,
): Promise<MessageRow[]> {
  const cursor = beyond.lt ?? beyond.gt;
  const values: unknown[] = [projectId, take];
  if (conversationId) values.push(conversationId);
  if (cursor !== undefined) values.push(cursor);
  const statement = pageStatement(!!conversationId, beyond.lt !== undefined ? 'lt' : beyond.gt !== undefined ? 'gt' : undefined, order);
  const { rows } = await rt.db.pool.query<JoinedRow>({ ...statement, values });
  return rows.map(toMessageRow);
}
