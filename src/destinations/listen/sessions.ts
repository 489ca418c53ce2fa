// The SQL of listen sessions and of the hand-offs too large for a NOTIFY (tables listen_sessions,
// listen_handoffs). A runner reads a destination's live sessions on every attempt to a cli destination.
import type pg from 'pg';
import { SESSION_STALE_SECONDS } from './wire.ts';

type Queryable = Pick<pg.Pool, 'query'>;

export interface LiveSession {
  id: string;
  hub: string;
  project_id: string;
}

export async function insertSession(db: Queryable, s: { id: string; projectId: string; destinationId: string; hub: string }): Promise<void> {
  await db.query(`INSERT INTO listen_sessions (id, project_id, destination_id, hub) VALUES ($1, $2, $3, $4)`, [s.id, s.projectId, s.destinationId, s.hub]);
}

export async function deleteSession(db: Queryable, id: string): Promise<void> {
  await db.query(`DELETE FROM listen_sessions WHERE id = $1`, [id]);
}

/** The heartbeat of one process's sessions; also drops what processes that died left behind. */
export async function refreshSessions(db: Queryable, ids: string[]): Promise<void> {
  if (ids.length) await db.query(`UPDATE listen_sessions SET seen_at = now() WHERE id = ANY($1::text[])`, [ids]);
  await db.query(
    `WITH s AS (DELETE FROM listen_sessions WHERE seen_at < now() - interval '10 minutes')
     DELETE FROM listen_handoffs WHERE created_at < now() - interval '10 minutes'`,
  );
}

/** The sessions that take a destination's deliveries now, oldest first. */
export async function liveSessions(db: Queryable, destinationId: string): Promise<LiveSession[]> {
  const { rows } = await db.query<LiveSession>(
    `SELECT id, hub, project_id FROM listen_sessions
      WHERE destination_id = $1 AND seen_at > now() - make_interval(secs => $2) ORDER BY connected_at, id`,
    [destinationId, SESSION_STALE_SECONDS],
  );
  return rows;
}

/** Of these destinations, those with a live session. */
export async function destinationsListenedTo(db: Queryable, destinationIds: string[]): Promise<Set<string>> {
  if (!destinationIds.length) return new Set();
  const { rows } = await db.query<{ destination_id: string }>(
    `SELECT DISTINCT destination_id FROM listen_sessions
      WHERE destination_id = ANY($1::text[]) AND seen_at > now() - make_interval(secs => $2)`,
    [destinationIds, SESSION_STALE_SECONDS],
  );
  return new Set(rows.map((r) => r.destination_id));
}

export async function storeHandoff(db: Queryable, id: string, projectId: string, request: Buffer): Promise<void> {
  await db.query(`INSERT INTO listen_handoffs (id, project_id, request) VALUES ($1, $2, $3)`, [id, projectId, request]);
}

export async function loadHandoff(db: Queryable, id: string): Promise<Buffer | null> {
  const { rows } = await db.query<{ request: Buffer }>(`SELECT request FROM listen_handoffs WHERE id = $1`, [id]);
  return rows[0]?.request ?? null;
}

export async function deleteHandoff(db: Queryable, id: string): Promise<void> {
  await db.query(`DELETE FROM listen_handoffs WHERE id = $1`, [id]);
}
