import type { QueryArrayConfig } from 'pg';
import type { Runtime } from '../runtime.ts';
import type { MessageRow } from './rows.ts';

/**
 * Message reads in one SQL round trip: each message joined with its contact, on the plain pg pool.
 * Lists are the API's hottest reads; Prisma would load the contacts with a second query and
 * spend more CPU mapping both than the database spends answering them. Rows come out in the
 * exact shape Prisma gives with `include: { contact: true }` (MessageRow).
 */

// Rows come back as arrays (rowMode 'array'): pg then skips building an object keyed by column
// name for each row, which toMessageRow would only copy again. The indexes below follow COLUMNS.
const COLUMNS = `m.id, m.project_id, m.conversation_id, m.contact_id, m.body, m.reactions, m.attachments, m.read_at,
  m.created_at, m.updated_at, c.project_id, c.username, c.phone_number, c.avatar_url, c.display_name, c.last_active_at,
  c.created_at`;

type JoinedRow = [
  id: string,
  projectId: string,
  conversationId: string,
  contactId: string,
  body: string,
  reactions: MessageRow['reactions'],
  attachments: MessageRow['attachments'],
  readAt: Date | null,
  createdAt: Date,
  updatedAt: Date | null,
  contactProjectId: string,
  username: string,
  phoneNumber: string,
  avatarUrl: string | null,
  displayName: string | null,
  lastActiveAt: Date | null,
  contactCreatedAt: Date,
];

function toMessageRow(r: JoinedRow): MessageRow {
  return {
    id: r[0],
    projectId: r[1],
    conversationId: r[2],
    contactId: r[3],
    body: r[4],
    reactions: r[5],
    attachments: r[6],
    readAt: r[7],
    createdAt: r[8],
    updatedAt: r[9],
    contact: {
      id: r[3],
      projectId: r[10],
      username: r[11],
      phoneNumber: r[12],
      avatarUrl: r[13],
      displayName: r[14],
      lastActiveAt: r[15],
      createdAt: r[16],
    },
  };
}

/** One message of the project, with its contact; null when there is none. */
const BY_ID: Pick<QueryArrayConfig, 'name' | 'text' | 'rowMode'> = {
  name: 'message_by_id',
  rowMode: 'array',
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
const pageStatements = new Map<string, Pick<QueryArrayConfig, 'name' | 'text' | 'rowMode'>>();

function pageStatement(byConversation: boolean, beyond: 'lt' | 'gt' | undefined, order: 'asc' | 'desc') {
  const key = `${byConversation ? 'conv' : 'proj'}_${beyond ?? 'all'}_${order}`;
  let statement = pageStatements.get(key);
  if (!statement) {
    const where = ['m.project_id = $1'];
    if (byConversation) where.push('m.conversation_id = $3');
    if (beyond) where.push(`m.id ${beyond === 'lt' ? '<' : '>'} $${byConversation ? 4 : 3}`);
    statement = {
      name: `messages_page_${key}`,
      rowMode: 'array',
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
