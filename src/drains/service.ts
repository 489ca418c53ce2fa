import { z } from 'zod';
import { inTransaction } from '../db/client.ts';
import { encryptSecret } from '../encryption.ts';
import { InvalidRequest, NotFound, QuotaExceeded } from '../errors.ts';
import { newId } from '../ids.ts';
import { paginate, type Page, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { assertStorable, parseInput } from '../validation.ts';
import { generateWebhookSecret, parseGraceSeconds } from '../webhook-config/secrets.ts';

type Rt = Pick<Runtime, 'db'>;

export const DRAIN_KINDS = ['delivery.succeeded', 'delivery.failed', 'delivery.retrying', 'attempt.finished', 'dlq.added', 'webhook.changed'] as const;

/** Drains per project by tier (CONTRACT §9): none below Pro; Enterprise unlimited. */
export const DRAIN_LIMITS: Record<string, number> = { free: 0, starter: 0, pro: 1, business: 3, enterprise: Number.POSITIVE_INFINITY };

export interface DrainView {
  id: string;
  name: string;
  url: string;
  events: string[];
  enabled: boolean;
  droppedCount: number;
  lastError: string | null;
  lastSentAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

interface DrainRow {
  id: string;
  project_id: string;
  name: string;
  url: string;
  events: string[];
  enabled: boolean;
  dropped_count: string;
  last_error: string | null;
  last_sent_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const view = (r: DrainRow): DrainView => ({
  id: r.id,
  name: r.name,
  url: r.url,
  events: r.events,
  enabled: r.enabled,
  droppedCount: Number(r.dropped_count),
  lastError: r.last_error,
  lastSentAt: r.last_sent_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const COLUMNS = 'id, project_id, name, url, events, enabled, dropped_count, last_error, last_sent_at, created_at, updated_at';

const nameSchema = z.string().trim().min(1).max(200);
const urlSchema = z
  .string()
  .max(2048)
  .url()
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL');
const eventsSchema = z.array(z.enum(DRAIN_KINDS)).min(1).max(DRAIN_KINDS.length).transform((k) => [...new Set(k)]);

export interface DrainInput {
  name?: unknown;
  url?: unknown;
  events?: unknown;
  enabled?: unknown;
}

function validate(input: DrainInput, create: boolean) {
  const out: { name?: string; url?: string; events?: string[]; enabled?: boolean } = {};
  if (create && (input.url === undefined || input.url === null)) throw new InvalidRequest('url is required.', 'url');
  if (input.name !== undefined && input.name !== null) out.name = parseInput(nameSchema, input.name, 'name');
  if (input.url !== undefined && input.url !== null) out.url = parseInput(urlSchema, input.url, 'url');
  if (input.events !== undefined && input.events !== null) out.events = parseInput(eventsSchema, input.events, 'events');
  if (input.enabled !== undefined && input.enabled !== null) {
    if (typeof input.enabled !== 'boolean') throw new InvalidRequest('enabled must be true or false.', 'enabled');
    out.enabled = input.enabled;
  }
  assertStorable({ name: out.name, url: out.url }, '');
  return out;
}

/** 403 below Pro (drains count 0 there). */
async function gate(rt: Rt, projectId: string) {
  const project = await getProject(rt, projectId);
  if (DRAIN_LIMITS[project.tier] === 0) requireFeature(project.tier, 'event_drains');
  return project;
}

async function find(rt: Rt, projectId: string, drainId: string): Promise<DrainRow> {
  const { rows } = await rt.db.pool.query<DrainRow>(`SELECT ${COLUMNS} FROM event_drains WHERE id = $1 AND project_id = $2`, [drainId, projectId]);
  if (!rows[0]) throw new NotFound('drain', drainId);
  return rows[0];
}

export async function listDrains(rt: Rt, projectId: string, page: PageRequest): Promise<Page<DrainView>> {
  await gate(rt, projectId);
  return paginate(page, {
    scope: `drains:${projectId}`,
    filters: {},
    order: 'asc',
    fetch: async (range, order, take) => {
      const { rows } = await rt.db.pool.query<DrainRow>(
        `SELECT ${COLUMNS} FROM event_drains WHERE project_id = $1 AND id > $2 AND ($3::text IS NULL OR id < $3) ORDER BY id ${order === 'asc' ? 'ASC' : 'DESC'} LIMIT $4`,
        [projectId, range.gt ?? '', range.lt ?? null, take],
      );
      return rows.map(view);
    },
  });
}

export async function getDrain(rt: Rt, projectId: string, drainId: string): Promise<DrainView> {
  const row = await find(rt, projectId, drainId);
  await gate(rt, projectId);
  return view(row);
}

/** Creates a drain (all kinds unless `events` names some); its signing secret is answered here only. */
export async function createDrain(rt: Rt, projectId: string, input: DrainInput): Promise<DrainView & { signingSecret: string }> {
  const project = await gate(rt, projectId);
  const v = validate(input, true);
  const limit = DRAIN_LIMITS[project.tier];
  const secret = generateWebhookSecret();
  const id = newId('drn');
  await inTransaction(rt.db.pool, async (client) => {
    // The project row's lock orders concurrent creates, so the count holds.
    await client.query('SELECT 1 FROM projects WHERE id = $1 FOR UPDATE', [projectId]);
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM event_drains WHERE project_id = $1', [projectId]);
    const current = Number(rows[0].n);
    if (current + 1 > limit) throw new QuotaExceeded({ quota: 'event_drains', scope: 'project', limit, current, delta: 1 });
    await client.query(
      `INSERT INTO event_drains (id, project_id, name, url, events, enabled, secret_enc, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, now())`,
      [id, projectId, v.name ?? '', v.url, v.events ?? [...DRAIN_KINDS], v.enabled ?? true, encryptSecret(secret)],
    );
  });
  return { ...(await getDrain(rt, projectId, id)), signingSecret: secret };
}

export async function updateDrain(rt: Rt, projectId: string, drainId: string, input: DrainInput): Promise<DrainView> {
  await getDrain(rt, projectId, drainId);
  const v = validate(input, false);
  const sets: string[] = [];
  const values: unknown[] = [drainId];
  const set = (column: string, value: unknown) => {
    values.push(value);
    sets.push(`${column} = $${values.length}`);
  };
  if (v.name !== undefined) set('name', v.name);
  if (v.url !== undefined) set('url', v.url);
  if (v.events !== undefined) set('events', v.events);
  if (v.enabled !== undefined) set('enabled', v.enabled);
  await rt.db.pool.query(`UPDATE event_drains SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE id = $1`, values);
  return getDrain(rt, projectId, drainId);
}

export async function deleteDrain(rt: Rt, projectId: string, drainId: string) {
  await getDrain(rt, projectId, drainId);
  await inTransaction(rt.db.pool, async (client) => {
    await client.query('DELETE FROM event_drains WHERE id = $1', [drainId]);
    await client.query('DELETE FROM drain_outbox WHERE drain_id = $1', [drainId]);
  });
  return { id: drainId, deleted: true };
}

/** A new signing secret (answered once); the previous one still signs for `graceSeconds` (default 86400). */
export async function rotateDrainSecret(rt: Rt, projectId: string, drainId: string, graceSecondsRaw: unknown) {
  await getDrain(rt, projectId, drainId);
  const graceSeconds = parseGraceSeconds(graceSecondsRaw);
  const secret = generateWebhookSecret();
  await rt.db.pool.query(
    `UPDATE event_drains SET previous_secret_enc = secret_enc, previous_expires_at = now() + make_interval(secs => $3), secret_enc = $2, updated_at = now() WHERE id = $1`,
    [drainId, encryptSecret(secret), graceSeconds],
  );
  return { id: drainId, signingSecret: secret };
}
