import { createHash } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { inTransaction } from '../db/client.ts';
import { InvalidRequest, InvalidState, NotFound, QuotaExceeded } from '../errors.ts';
import type { Automation, AutomationRun, AutomationVersion } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import { paginate, type Page, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import { enforcing, lockQuotaScope } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { parseInput } from '../validation.ts';
import { automationQuotas, MAX_CODE_BYTES } from './limits.ts';
import { sandboxOf } from './sandbox-instance.ts';
import { forgetRunContexts } from './run.ts';

type Rt = Pick<Runtime, 'db' | 'config'>;

/** 409 invalid_state when this deployment runs no Automations (AUTOMATIONS_ENABLED=false). */
export function requireAutomationsEnabled(rt: Pick<Runtime, 'config'>): void {
  if (!rt.config.AUTOMATIONS_ENABLED) throw new InvalidState('Automations are turned off on this deployment (AUTOMATIONS_ENABLED=false).');
}

/** The project, after the tier gate (Starter and above). */
async function gate(rt: Rt, projectId: string) {
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'automations');
  return project;
}

const nameSchema = z.string().trim().min(1).max(200);

/** The code of a version: an ES module that compiles (400 with `param: "code"` otherwise). */
async function validCode(rt: Rt, code: unknown): Promise<string> {
  if (typeof code !== 'string' || code.trim() === '') throw new InvalidRequest('code is required: an ES module whose default export is (event, ctx) => result.', 'code');
  if (Buffer.byteLength(code) > MAX_CODE_BYTES) throw new InvalidRequest(`code is larger than ${MAX_CODE_BYTES} bytes.`, 'code');
  const problem = await sandboxOf(rt).check(code);
  if (problem) throw new InvalidRequest(`code does not compile: ${problem}`, 'code');
  return code;
}

const sha256 = (code: string) => createHash('sha256').update(code).digest('hex');

/** Seconds until the next UTC midnight (when the daily version count frees). */
function secondsToUtcMidnight(): number {
  const now = new Date();
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

/** "Worker creations per day" are versions created per UTC day (each is a new sandboxed worker build). */
async function checkDailyCreations(rt: Rt, client: pg.PoolClient, projectId: string, limit: number) {
  const { rows } = await client.query(
    `SELECT count(*)::int AS n FROM automation_versions WHERE project_id = $1 AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`,
    [projectId],
  );
  if (enforcing(rt) && rows[0].n + 1 > limit) {
    throw new QuotaExceeded({ quota: 'automation_worker_creations', scope: 'project', limit, current: rows[0].n, delta: 1, retryAfterSec: secondsToUtcMidnight() });
  }
}

async function countActive(client: pg.PoolClient, projectId: string): Promise<number> {
  const { rows } = await client.query(`SELECT count(*)::int AS n FROM automations WHERE project_id = $1 AND status = 'active'`, [projectId]);
  return rows[0].n;
}

export async function createAutomation(rt: Rt, projectId: string, input: { name?: unknown; code?: unknown }): Promise<Automation> {
  const project = await gate(rt, projectId);
  const name = parseInput(nameSchema, input.name, 'name');
  if (input.code === undefined || input.code === null) throw new InvalidRequest('code is required: an ES module whose default export is (event, ctx) => result.', 'code');
  const code = await validCode(rt, input.code);
  requireAutomationsEnabled(rt);
  const quotas = automationQuotas(project);
  const id = newId('aut');
  await inTransaction(rt.db.pool, async (client) => {
    await lockQuotaScope(client, `automations:${projectId}`);
    const { rows } = await client.query('SELECT count(*)::int AS n FROM automations WHERE project_id = $1', [projectId]);
    if (enforcing(rt)) {
      if (rows[0].n + 1 > quotas.automations) throw new QuotaExceeded({ quota: 'automations', scope: 'project', limit: quotas.automations, current: rows[0].n, delta: 1 });
      const active = await countActive(client, projectId);
      if (active + 1 > quotas.active_automations) throw new QuotaExceeded({ quota: 'active_automations', scope: 'project', limit: quotas.active_automations, current: active, delta: 1 });
    }
    await checkDailyCreations(rt, client, projectId, quotas.automation_worker_creations);
    await client.query(
      `INSERT INTO automations (id, project_id, name, status, current_version, created_at, updated_at) VALUES ($1, $2, $3, 'active', 1, now(), now())`,
      [id, projectId, name],
    );
    await client.query(`INSERT INTO automation_versions (automation_id, project_id, version, code, code_sha256) VALUES ($1, $2, 1, $3, $4)`, [id, projectId, code, sha256(code)]);
  });
  return getAutomation(rt, projectId, id);
}

export async function getAutomation(rt: Rt, projectId: string, id: string): Promise<Automation> {
  const automation = await rt.db.prisma.automation.findFirst({ where: { id, projectId } });
  if (!automation) throw new NotFound('automation', id);
  await gate(rt, projectId);
  return automation;
}

export async function listAutomations(rt: Rt, projectId: string, page: PageRequest): Promise<Page<Automation>> {
  await gate(rt, projectId);
  return paginate(page, {
    scope: `automations:${projectId}`,
    filters: {},
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.automation.findMany({ where: { projectId, id: range }, orderBy: { id: order }, take }),
  });
}

export async function updateAutomation(rt: Rt, projectId: string, id: string, input: { name?: unknown; status?: unknown }): Promise<Automation> {
  const current = await getAutomation(rt, projectId, id);
  const project = await getProject(rt, projectId);
  const data: { name?: string; status?: string } = {};
  if (input.name !== undefined && input.name !== null) data.name = parseInput(nameSchema, input.name, 'name');
  if (input.status !== undefined && input.status !== null) {
    if (input.status !== 'active' && input.status !== 'disabled') throw new InvalidRequest('status must be "active" or "disabled".', 'status');
    data.status = input.status;
  }
  if (data.status === 'active' && current.status !== 'active') {
    requireAutomationsEnabled(rt);
    const quotas = automationQuotas(project);
    await inTransaction(rt.db.pool, async (client) => {
      await lockQuotaScope(client, `automations:${projectId}`);
      const active = await countActive(client, projectId);
      if (enforcing(rt) && active + 1 > quotas.active_automations) {
        throw new QuotaExceeded({ quota: 'active_automations', scope: 'project', limit: quotas.active_automations, current: active, delta: 1 });
      }
      const { rowCount } = await client.query(`UPDATE automations SET status = 'active', name = COALESCE($3, name), updated_at = now() WHERE id = $1 AND project_id = $2`, [id, projectId, data.name ?? null]);
      if (rowCount === 0) throw new NotFound('automation', id);
    });
    forgetRunContexts();
    return getAutomation(rt, projectId, id);
  }
  if (Object.keys(data).length === 0) return current;
  // Scoped to the project, and a 404 (not a 500) when the automation was deleted meanwhile.
  const { count } = await rt.db.prisma.automation.updateMany({ where: { id, projectId }, data });
  if (count === 0) throw new NotFound('automation', id);
  forgetRunContexts();
  return getAutomation(rt, projectId, id);
}

/** Deletes an automation with its versions and runs; 409 invalid_state while a webhook's transform pins it. */
export async function deleteAutomation(rt: Rt, projectId: string, id: string): Promise<{ id: string; deleted: boolean }> {
  await getAutomation(rt, projectId, id);
  await inTransaction(rt.db.pool, async (client) => {
    const { rows } = await client.query(
      `SELECT id FROM webhooks WHERE project_id = $1 AND transform->>'kind' = 'automation' AND transform->>'automationId' = $2 LIMIT 1 FOR UPDATE`,
      [projectId, id],
    );
    if (rows[0]) throw new InvalidState(`The automation is the transform of webhook ${rows[0].id}: remove that transform first.`);
    await client.query('DELETE FROM automations WHERE id = $1 AND project_id = $2', [id, projectId]);
  });
  forgetRunContexts();
  return { id, deleted: true };
}

export async function createVersion(rt: Rt, projectId: string, automationId: string, input: { code?: unknown }): Promise<AutomationVersion> {
  await getAutomation(rt, projectId, automationId);
  const project = await getProject(rt, projectId);
  if (input.code === undefined || input.code === null) throw new InvalidRequest('code is required.', 'code');
  const code = await validCode(rt, input.code);
  requireAutomationsEnabled(rt);
  const quotas = automationQuotas(project);
  const version = await inTransaction(rt.db.pool, async (client) => {
    await lockQuotaScope(client, `automations:${projectId}`);
    const { rows } = await client.query('SELECT current_version FROM automations WHERE id = $1 FOR UPDATE', [automationId]);
    if (!rows[0]) throw new NotFound('automation', automationId);
    const count = await client.query('SELECT count(*)::int AS n FROM automation_versions WHERE automation_id = $1', [automationId]);
    if (enforcing(rt) && count.rows[0].n + 1 > quotas.automation_versions) {
      throw new QuotaExceeded({ quota: 'automation_versions', scope: 'project', limit: quotas.automation_versions, current: count.rows[0].n, delta: 1 });
    }
    await checkDailyCreations(rt, client, projectId, quotas.automation_worker_creations);
    const next = rows[0].current_version + 1;
    await client.query(`INSERT INTO automation_versions (automation_id, project_id, version, code, code_sha256) VALUES ($1, $2, $3, $4, $5)`, [automationId, projectId, next, code, sha256(code)]);
    await client.query('UPDATE automations SET current_version = $2, updated_at = now() WHERE id = $1', [automationId, next]);
    return next;
  });
  return (await rt.db.prisma.automationVersion.findUnique({ where: { automationId_version: { automationId, version } } }))!;
}

export async function listVersions(rt: Rt, projectId: string, automationId: string, page: PageRequest): Promise<Page<AutomationVersion>> {
  await getAutomation(rt, projectId, automationId);
  return paginate(page, {
    scope: `automation-versions:${automationId}`,
    filters: {},
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.automationVersion.findMany({ where: { automationId, version: range }, orderBy: { version: order }, take }),
    positionOf: (v) => String(v.version),
    keyOf: Number,
  });
}

export async function listRuns(rt: Rt, projectId: string, automationId: string, page: PageRequest): Promise<Page<AutomationRun>> {
  await getAutomation(rt, projectId, automationId);
  return paginate(page, {
    scope: `automation-runs:${automationId}`,
    filters: {},
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.automationRun.findMany({ where: { automationId, id: range }, orderBy: { id: order }, take }),
  });
}

/**
 * The version a webhook transform pins: the automation must be the project's, active, and the
 * version must exist (the latest when left out). Checked when the transform is set.
 */
export async function resolvePinnedVersion(rt: Rt, projectId: string, automationId: unknown, version: unknown): Promise<{ automationId: string; version: number }> {
  if (typeof automationId !== 'string' || automationId === '') throw new InvalidRequest('automationId is required with kind "automation".', 'automationId');
  if (version !== undefined && version !== null && (typeof version !== 'number' || !Number.isInteger(version) || version < 1)) {
    throw new InvalidRequest('version must be a positive integer.', 'version');
  }
  const automation = await rt.db.prisma.automation.findFirst({ where: { id: automationId, projectId } });
  if (!automation) throw new NotFound('automation', automationId);
  const pinned = typeof version === 'number' ? version : automation.currentVersion;
  const exists = await rt.db.prisma.automationVersion.findUnique({ where: { automationId_version: { automationId, version: pinned } }, select: { version: true } });
  if (!exists) throw new InvalidRequest(`automation ${automationId} has no version ${pinned}.`, 'version');
  requireAutomationsEnabled(rt);
  if (automation.status !== 'active') throw new InvalidState('The automation is disabled: activate it first.');
  return { automationId, version: pinned };
}

const hostSchema = z
  .string()
  .trim()
  .toLowerCase()
  .min(1)
  .max(253)
  .refine((h) => /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(h) || /^[0-9a-f:.]+$/.test(h), 'must be an exact host name (no scheme, port, path or wildcard)');
const allowedHostsSchema = z.array(hostSchema).max(100);

export async function getEgressPolicy(rt: Rt, projectId: string): Promise<{ allowedHosts: string[] }> {
  const project = await gate(rt, projectId);
  return { allowedHosts: (project.egressAllowedHosts as string[] | null) ?? [] };
}

/** Enterprise self-service: the exact hosts `ctx.fetch` may reach (an empty list blocks egress). */
export async function setEgressPolicy(rt: Rt, projectId: string, input: { allowedHosts?: unknown }): Promise<{ allowedHosts: string[] }> {
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'automation_egress_policies');
  if (input.allowedHosts === undefined || input.allowedHosts === null) throw new InvalidRequest('allowedHosts is required (an empty list blocks egress).', 'allowedHosts');
  const hosts = [...new Set(parseInput(allowedHostsSchema, input.allowedHosts, 'allowedHosts'))];
  await rt.db.prisma.project.update({ where: { id: projectId }, data: { egressAllowedHosts: hosts } });
  forgetRunContexts();
  return { allowedHosts: hosts };
}
