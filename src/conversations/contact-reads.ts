import type { QueryConfig } from 'pg';
import type { Runtime } from '../runtime.ts';
import type { ContactRow } from './rows.ts';

/**
 * Contact list reads in one SQL round trip on the pg pool, each contact with its conversation's id,
 * in the shape Prisma gives with CONTACT_INCLUDE (ContactRow). See message-reads.ts for why.
 */

const COLUMNS = `c.id, c.project_id, c.username, c.phone_number, c.avatar_url, c.display_name, c.last_active_at,
  c.created_at, conv.id AS conversation_id`;

interface JoinedRow {
  id: string;
  project_id: string;
  username: string;
  phone_number: string;
  avatar_url: string | null;
  display_name: string | null;
  last_active_at: Date | null;
  created_at: Date;
  conversation_id: string | null;
}

function toContactRow(r: JoinedRow): ContactRow {
  return {
    id: r.id,
    projectId: r.project_id,
    username: r.username,
    phoneNumber: r.phone_number,
    avatarUrl: r.avatar_url,
    displayName: r.display_name,
    lastActiveAt: r.last_active_at,
    createdAt: r.created_at,
    conversation: r.conversation_id === null ? null : { id: r.conversation_id },
  };
}

export async function contactExists(rt: Pick<Runtime, 'db'>, projectId: string, id: string): Promise<boolean> {
  const { rowCount } = await rt.db.pool.query({ name: 'contact_exists', text: 'SELECT 1 FROM contacts WHERE id = $1 AND project_id = $2', values: [id, projectId] });
  return (rowCount ?? 0) > 0;
}

// One prepared statement per shape of page query (active filter × direction).
const pageStatements = new Map<string, Pick<QueryConfig, 'name' | 'text'>>();

function pageStatement(active: boolean | null | undefined, beyond: 'lt' | 'gt' | undefined, order: 'asc' | 'desc') {
  const key = `${active === true ? 'active' : active === false ? 'idle' : 'any'}_${beyond ?? 'all'}_${order}`;
  let statement = pageStatements.get(key);
  if (!statement) {
    const where = ['c.project_id = $1'];
    if (active === true) where.push('c.last_active_at IS NOT NULL');
    if (active === false) where.push('c.last_active_at IS NULL');
    if (beyond) where.push(`c.id ${beyond === 'lt' ? '<' : '>'} $3`);
    statement = {
      name: `contacts_page_${key}`,
      text: `SELECT ${COLUMNS} FROM contacts c LEFT JOIN conversations conv ON conv.contact_id = c.id
        WHERE ${where.join(' AND ')} ORDER BY c.id ${order.toUpperCase()} LIMIT $2`,
    };
    pageStatements.set(key, statement);
  }
  return statement;
}

/** Up to `take` contacts of the project, by id in `order`, beyond a cursor id. */
export async function readContactPage(
  rt: Pick<Runtime, 'db'>,
  projectId: string,
  active: boolean | null | undefined,
  beyond: { lt?: string; gt?: string },
  order: 'asc' | 'desc',
  take: number,
): Promise<ContactRow[]> {
  const cursor = beyond.lt ?? beyond.gt;
  const values: unknown[] = [projectId, take];
  if (cursor !== undefined) values.push(cursor);
  const statement = pageStatement(active, beyond.lt !== undefined ? 'lt' : beyond.gt !== undefined ? 'gt' : undefined, order);
  const { rows } = await rt.db.pool.query<JoinedRow>({ ...statement, values });
  return rows.map(toContactRow);
}
