import { TIERS, type Tier } from '../config.ts';
import { InvalidRequest, NotFound, Unauthorized } from '../errors.ts';
import { newId, randomToken } from '../ids.ts';
import type { Runtime } from '../runtime.ts';
import { sha256Hex } from '../secrets.ts';
import type { Auth } from '../graphql/builder.ts';
import { QUOTA_NAMES } from './tiers.ts';

type Rt = Pick<Runtime, 'db'>;

export function assertTier(tier: string): Tier {
  if (!(TIERS as readonly string[]).includes(tier)) throw new InvalidRequest(`tier must be one of ${TIERS.join(', ')}`, 'tier');
  return tier as Tier;
}

export async function createProject(rt: Rt, input: { name: string; tier?: string }) {
  const name = input.name?.trim();
  if (!name) throw new InvalidRequest('name is required', 'name');
  const tier = assertTier(input.tier ?? 'free');
  const project = await rt.db.prisma.project.create({ data: { id: newId('prj'), name, tier } });
  const { apiKey, secret } = await createApiKey(rt, project.id, 'default');
  return { project, apiKey, secret };
}

export async function getProject(rt: Rt, projectId: string) {
  const project = await rt.db.prisma.project.findUnique({ where: { id: projectId } });
  if (!project) throw new NotFound('project', projectId);
  return project;
}

export async function setProjectTier(rt: Rt, projectId: string, tier: string) {
  await getProject(rt, projectId);
  return rt.db.prisma.project.update({ where: { id: projectId }, data: { tier: assertTier(tier) } });
}

/** Creates a key; the plaintext (`sk_…`) is returned here only and stored as a SHA-256 hash. */
export async function createApiKey(rt: Rt, projectId: string, name = 'default') {
  const secret = randomToken('sk', 32);
  const apiKey = await rt.db.prisma.apiKey.create({
    data: { id: newId('key'), projectId, name, prefix: secret.slice(0, 10), hash: sha256Hex(secret) },
  });
  return { apiKey, secret };
}

export async function revokeApiKey(rt: Rt, projectId: string, keyId: string) {
  const key = await rt.db.prisma.apiKey.findFirst({ where: { id: keyId, projectId } });
  if (!key) throw new NotFound('API key', keyId);
  if (key.revokedAt) return key;
  const revoked = await rt.db.prisma.apiKey.update({ where: { id: key.id }, data: { revokedAt: new Date() } });
  forgetCachedKeys(rt);
  await rt.db.pool.query('SELECT pg_notify($1, $2)', ['app_events', JSON.stringify({ t: API_KEYS_TOPIC, p: { id: key.id } })]);
  return revoked;
}

export async function listApiKeys(rt: Rt, projectId: string) {
  return rt.db.prisma.apiKey.findMany({ where: { projectId }, orderBy: { id: 'desc' } });
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
  const { rows } = await rt.db.pool.query<{ id: string; project_id: string }>(
    'SELECT id, project_id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL',
    [hash],
  );
  if (rows.length === 0) throw new Unauthorized('The API key is unknown or revoked.');
  const auth = { projectId: rows[0].project_id, apiKeyId: rows[0].id };
  if (cache.size > 10_000) cache.clear();
  cache.set(hash, { auth, until: Date.now() + AUTH_CACHE_TTL_MS });
  return auth;
}

/** On an empty database, creates the `default` project and returns its key (printed once by the caller). */
export async function ensureDefaultProject(rt: Rt, tier: Tier): Promise<{ projectId: string; secret: string } | null> {
  const client = await rt.db.pool.connect();
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
  if (!(QUOTA_NAMES as string[]).includes(quota)) throw new InvalidRequest(`quota must be one of ${QUOTA_NAMES.join(', ')}`, 'quota');
  if (project.tier !== 'enterprise') throw new InvalidRequest('custom quotas are for enterprise projects', 'quota');
  const custom = { ...(project.customQuotas as Record<string, number>) };
  if (value === 'default') delete custom[quota];
  else {
    if (!/^\d+$/.test(value)) throw new InvalidRequest('value must be a non-negative integer', 'value');
    custom[quota] = Number(value);
  }
  return rt.db.prisma.project.update({ where: { id: projectId }, data: { customQuotas: custom } });
}
