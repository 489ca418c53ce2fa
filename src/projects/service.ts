import { TIERS, type Tier } from '../config.ts';
import { InvalidRequest, NotFound, Unauthorized } from '../errors.ts';
import { newId, randomToken } from '../ids.ts';
import type { Runtime } from '../runtime.ts';
import { sha256Hex } from '../encryption.ts';
import type { Auth } from '../auth.ts';
import type { Project } from '../generated/prisma/client.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import { ADMIN_ACTOR, recordAudit } from './audit.ts';
import { hasFeature, requireFeature } from './gates.ts';
import { AUTOMATION_QUOTA_NAMES, QUOTA_NAMES } from './tiers.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

export function assertTier(tier: string): Tier {
  if (!(TIERS as readonly string[]).includes(tier)) throw new InvalidRequest(`tier must be one of ${TIERS.join(', ')}`, 'tier');
  return tier as Tier;
}

export async function createProject(rt: Rt, input: { name: string; tier?: string }) {
  const name = input.name?.trim();
  if (!name) throw new InvalidRequest('name is required', 'name');
  const tier = assertTier(input.tier ?? 'free');
  const project = await rt.db.prisma.$transaction(async (tx) => {
    const p = await tx.project.create({ data: { id: newId('prj'), name, tier } });
    await recordAudit(tx, { projectId: p.id, actor: ADMIN_ACTOR, action: 'project.created', targetType: 'project', targetId: p.id, data: { name, tier } });
    return p;
  });
  const { apiKey, secret } = await createApiKey(rt, project.id, 'default');
  return { project, apiKey, secret };
}

export async function getProject(rt: Rt, projectId: string) {
  const project = await rt.db.prisma.project.findUnique({ where: { id: projectId } });
  if (!project) throw new NotFound('project', projectId);
  return project;
}

/**
 * The project as `GET /v1/project` answers it, by one prepared SQL statement on the pg pool: every
 * authenticated client polls it, and Prisma's runtime costs more CPU than the read itself.
 */
export async function readProject(rt: Rt, projectId: string): Promise<Project> {
  const { rows } = await rt.db.pool.query<Project>({
    name: 'project_by_id',
    text: `SELECT id, name, tier, overage_enabled AS "overageEnabled", custom_quotas AS "customQuotas",
             created_at AS "createdAt", updated_at AS "updatedAt"
           FROM projects WHERE id = $1`,
    values: [projectId],
  });
  if (rows.length === 0) throw new NotFound('project', projectId);
  return rows[0];
}

/** Operator CLI. A tier without overage switches overage off. */
export async function setProjectTier(rt: Rt, projectId: string, tier: string) {
  const before = await getProject(rt, projectId);
  const next = assertTier(tier);
  const changed = await rt.db.prisma.$transaction(async (tx) => {
    const project = await tx.project.update({
      where: { id: projectId },
      data: { tier: next, ...(hasFeature(next, 'overage') ? {} : { overageEnabled: false }) },
    });
    await recordAudit(tx, { projectId, actor: ADMIN_ACTOR, action: 'project.tier_changed', targetType: 'project', targetId: projectId, data: { from: before.tier, to: next } });
    return project;
  });
  ingestTargetsChanged(rt, { projectId });
  return changed;
}

/**
 * PATCH /v1/project. Overage (passing the monthly delivery limit) is for paid tiers: 403 on Free,
 * whichever value is sent.
 */
export async function updateProject(rt: Rt, projectId: string, input: { overageEnabled?: boolean | null; name?: string | null }, actor: string) {
  const project = await getProject(rt, projectId);
  const data: { overageEnabled?: boolean; name?: string } = {};
  if (input.overageEnabled !== undefined && input.overageEnabled !== null) {
    requireFeature(project.tier, 'overage');
    data.overageEnabled = input.overageEnabled;
  }
  if (input.name !== undefined && input.name !== null) {
    const name = input.name.trim();
    if (!name || name.length > 200) throw new InvalidRequest('name must be 1 to 200 characters.', 'name');
    data.name = name;
  }
  if (Object.keys(data).length === 0) return project;
  const updated = await rt.db.prisma.$transaction(async (tx) => {
    const updated = await tx.project.update({ where: { id: projectId }, data });
    await recordAudit(tx, { projectId, actor, action: 'project.updated', targetType: 'project', targetId: projectId, data });
    return updated;
  });
  // Overage is read by ingest's quota checks.
  if (data.overageEnabled !== undefined) ingestTargetsChanged(rt, { projectId });
  return updated;
}

/** Creates a key; the plaintext (`sk_…`) is returned here only and stored as a SHA-256 hash. */
export async function createApiKey(rt: Rt, projectId: string, name = 'default', actor = ADMIN_ACTOR) {
  const keyName = name.trim() || 'default';
  if (keyName.length > 200) throw new InvalidRequest('name must be at most 200 characters.', 'name');
  const secret = randomToken('sk', 32);
  const apiKey = await rt.db.prisma.$transaction(async (tx) => {
    const key = await tx.apiKey.create({
      data: { id: newId('key'), projectId, name: keyName, prefix: secret.slice(0, 10), hash: sha256Hex(secret) },
    });
    await recordAudit(tx, { projectId, actor, action: 'api_key.created', targetType: 'api_key', targetId: key.id, data: { name: keyName } });
    return key;
  });
  return { apiKey, secret };
}

export async function revokeApiKey(rt: Rt, projectId: string, keyId: string, actor = ADMIN_ACTOR) {
  const key = await rt.db.prisma.apiKey.findFirst({ where: { id: keyId, projectId } });
  if (!key) throw new NotFound('API key', keyId);
  if (key.revokedAt) return key;
  const revoked = await rt.db.prisma.$transaction(async (tx) => {
    const updated = await tx.apiKey.update({ where: { id: key.id }, data: { revokedAt: new Date() } });
    await recordAudit(tx, { projectId, actor, action: 'api_key.revoked', targetType: 'api_key', targetId: key.id, data: {} });
    return updated;
  });
  forgetCachedKeys(rt);
  await rt.db.pool.query('SELECT pg_notify($1, $2)', ['app_events', JSON.stringify({ t: API_KEYS_TOPIC, p: { id: key.id } })]);
  return revoked;
}

export async function listApiKeys(rt: Rt, projectId: string) {
  return rt.db.prisma.apiKey.findMany({ where: { projectId }, orderBy: { id: 'desc' } });
}

/** GET /v1/project/api-keys: newest first, cursor-paginated; revoked keys included (with revokedAt). */
export async function listApiKeysPage(rt: Rt, projectId: string, req: PageRequest) {
  return paginate(req, {
    scope: `api-keys:${projectId}`,
    filters: {},
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.apiKey.findMany({ where: { projectId, id: range }, orderBy: { id: order }, take }),
  });
}

const AUTH_CACHE_TTL_MS = 10_000;
export const API_KEYS_TOPIC = 'api-keys:revoked';
const authCaches = new WeakMap<object, Map<string, { auth: Auth; until: number }>>();

function authCache(rt: Rt) {
  let cache = authCaches.get(rt.db);
  if (!cache) authCaches.set(rt.db, (cache = new Map()));
  return cache;
}

/** Drops cached key lookups; every API process does this when any key is revoked (NOTIFY). */
export function forgetCachedKeys(rt: Rt) {
  authCache(rt).clear();
}

/**
 * Resolves `Authorization: Bearer <key>` to the key's project. 401 when missing, unknown or
 * revoked. Lookups are cached for a few seconds per process; a revocation is broadcast to
 * every process (see revokeApiKey) so it takes effect at once.
 */
export async function authenticate(rt: Rt, authorization: string | undefined | null): Promise<Auth> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) throw new Unauthorized();
  const hash = sha256Hex(m[1]);
  const cache = authCache(rt);
  const hit = cache.get(hash);
  if (hit && hit.until > Date.now()) return hit.auth;
  // A hash lookup: the comparison happens inside the unique index, on a digest the caller cannot steer.
  const { rows } = await rt.db.pool.query<{ id: string; project_id: string; stale: boolean }>(
    `SELECT id, project_id, (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') AS stale
     FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
    [hash],
  );
  if (rows.length === 0) throw new Unauthorized('The API key is unknown or revoked.');
  // lastUsedAt to the minute: one write per key per minute at most, off the request's path.
  if (rows[0].stale) rt.db.pool.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [rows[0].id]).catch(() => {});
  const auth = { projectId: rows[0].project_id, apiKeyId: rows[0].id };
  if (cache.size > 10_000) cache.clear();
  cache.set(hash, { auth, until: Date.now() + AUTH_CACHE_TTL_MS });
  return auth;
}

/** On an empty database, creates the `default` project and returns its key (printed once by the caller). */
export async function ensureDefaultProject(rt: Rt, tier: Tier): Promise<{ projectId: string; secret: string } | null> {
  // A session-level lock held across statements: on the server itself, never through a pooler.
  const client = await rt.db.direct.connect();
  try {
    await client.query('SELECT pg_advisory_lock(727002)');
    const { rows } = await client.query('SELECT 1 FROM projects LIMIT 1');
    if (rows.length > 0) return null;
    const { project, secret } = await createProject(rt, { name: 'default', tier });
    return { projectId: project.id, secret };
  } finally {
    await client.query('SELECT pg_advisory_unlock(727002)').catch(() => {});
    client.release();
  }
}

/** Enterprise custom quotas (admin CLI). Value is a non-negative integer; `default` removes the override. */
export async function setProjectQuota(rt: Rt, projectId: string, quota: string, value: string) {
  const project = await getProject(rt, projectId);
  const names: string[] = [...QUOTA_NAMES, ...AUTOMATION_QUOTA_NAMES];
  if (!names.includes(quota)) throw new InvalidRequest(`quota must be one of ${names.join(', ')}`, 'quota');
  if (project.tier !== 'enterprise') throw new InvalidRequest('custom quotas are for enterprise projects', 'quota');
  const custom = { ...(project.customQuotas as Record<string, number>) };
  if (value === 'default') delete custom[quota];
  else {
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidRequest('value must be a non-negative integer', 'value');
    custom[quota] = Number(value);
  }
  const updated = await rt.db.prisma.$transaction(async (tx) => {
    const updated = await tx.project.update({ where: { id: projectId }, data: { customQuotas: custom } });
    await recordAudit(tx, { projectId, actor: ADMIN_ACTOR, action: 'project.quota_set', targetType: 'project', targetId: projectId, data: { quota, value: custom[quota] ?? null } });
    return updated;
  });
  ingestTargetsChanged(rt, { projectId });
  return updated;
}
