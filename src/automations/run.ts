import { InvalidState, QuotaExceeded } from '../errors.ts';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { hasFeature } from '../projects/gates.ts';
import { enforcing } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { automationQuotas, MONTHLY_METRIC, MONTHLY_QUOTAS, runLimits, RUN_WALL_MS } from './limits.ts';
import type { RunResult } from './sandbox.ts';
import { sandboxOf } from './sandbox-instance.ts';

type Rt = Pick<Runtime, 'db' | 'config'>;

/** What the code receives as `event`: the routing context plus the event's id and time. */
export interface AutomationEvent {
  id: string;
  receivedAt: string;
  channel: string;
  method: string | null;
  path: string | null;
  query: Record<string, unknown>;
  headers: Record<string, unknown>;
  contentType: string | null;
  body: unknown;
}

export type AutomationOutcome =
  /** The bytes to deliver. */
  | { kind: 'payload'; body: Buffer; contentType: string; runId: string; version: number; value: unknown }
  /** The code returned null: the delivery ends `cancelled`. */
  | { kind: 'drop'; reason: string; runId: string; version: number }
  /** The run failed (or could not run): `terminal` ends the delivery, else the retry policy decides. */
  | { kind: 'failed'; error: string; terminal: boolean; runId: string | null; version: number; status: string }
  /** Every concurrency slot of the project is taken: try again at `runAt` (a job, not a held runner). */
  | { kind: 'wait'; runAt: Date };

// Every statement here goes through the relaxed pool (commits that do not wait for the disk):
// a lease or run record lost with a database crash costs at most a lease that expires and a
// run missing from the list (its delivery's attempt is made again, as every lost result is).

/** A lease outlives the longest run, so a slot of a runner that died frees by itself. */
const LEASE_TTL_MS = RUN_WALL_MS + 20_000;
/** How long a run that found no free slot waits before its job tries again. */
const WAIT_MS = 250;

const STATUS_TEXT: Record<string, string> = {
  cpu_limit: 'the automation reached its CPU limit',
  memory_limit: 'the automation reached its memory limit',
  subrequest_limit: 'the automation reached its subrequest limit',
  egress_blocked: "the automation's subrequest was blocked by the egress policy",
};

function secondsToNextUtcMonth(): number {
  const now = new Date();
  return Math.max(1, Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000));
}

interface RunContext {
  status: string;
  code: string;
  tier: string;
  custom_quotas: unknown;
  egress_allowed_hosts: unknown;
  usage: Record<string, string | number> | null;
}

/**
 * What a run needs to know (the code, the automation's state, the project's tier, quotas, egress
 * policy and this month's usage), read at most once per CONTEXT_TTL_MS per process and version:
 * a burst of deliveries costs one read, not one per delivery. So a change of state, policy or
 * tier takes effect within that time, and the monthly quotas may be passed by the runs of that
 * time (the runs' usage is still counted exactly).
 */
const CONTEXT_TTL_MS = 1_000;
const contexts = new Map<string, { at: number; ctx: RunContext | null }>();

async function runContext(rt: Rt, req: { projectId: string; automationId: string; version: number; mode: 'delivery' | 'test' }): Promise<RunContext | null> {
  const key = `${req.projectId}:${req.automationId}:${req.version}`;
  const cached = contexts.get(key);
  // test-delivery (interactive, rare) always reads afresh.
  if (cached && req.mode === 'delivery' && Date.now() - cached.at < CONTEXT_TTL_MS) return cached.ctx;
  const { rows } = await rt.db.relaxedPool.query({
    name: 'automation_run_context',
    text: `SELECT a.status, v.code, p.tier, p.custom_quotas, p.egress_allowed_hosts,
                  (SELECT json_object_agg(u.metric, u.total) FROM (
                     SELECT metric, sum(value)::bigint AS total FROM usage_counters
                      WHERE project_id = $1 AND webhook_id = '' AND period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AND metric = ANY($4::text[])
                      GROUP BY metric) u) AS usage
             FROM automations a
             JOIN automation_versions v ON v.automation_id = a.id AND v.version = $3
             JOIN projects p ON p.id = a.project_id
            WHERE a.id = $2 AND a.project_id = $1`,
    values: [req.projectId, req.automationId, req.version, Object.values(MONTHLY_METRIC)],
  });
  const ctx = (rows[0] as RunContext | undefined) ?? null;
  if (contexts.size >= 1_000) contexts.clear();
  contexts.set(key, { at: Date.now(), ctx });
  return ctx;
}

/** Forgets what runContext read (tests and management changes that must show at once in this process). */
export function forgetRunContexts(): void {
  contexts.clear();
}

/**
 * Runs the pinned version of an automation over one event, with the project's limits: the
 * deployment switch, the automation's state, the monthly quotas (usage counters), a concurrency
 * slot (a lease in PostgreSQL, across every runner), then the sandbox. The run is recorded
 * (automation_runs) and counted (usage_counters) in one statement.
 *
 * `mode: 'test'` (test-delivery) answers refusals as errors (409/429) rather than outcomes.
 */
export async function runAutomation(
  rt: Rt,
  req: { projectId: string; automationId: string; version: number; event: AutomationEvent; deliveryId: string | null; mode: 'delivery' | 'test' },
): Promise<AutomationOutcome> {
  const refuse = (error: string, err?: Error): AutomationOutcome => {
    if (req.mode === 'test' && err) throw err;
    return { kind: 'failed', error, terminal: true, runId: null, version: req.version, status: 'refused' };
  };
  if (!rt.config.AUTOMATIONS_ENABLED) {
    return refuse('automation failed: Automations are turned off on this deployment', new InvalidState('Automations are turned off on this deployment (AUTOMATIONS_ENABLED=false).'));
  }
  const ctx = await runContext(rt, req);
  if (!ctx) return refuse(`automation failed: automation ${req.automationId} version ${req.version} no longer exists`, new InvalidState('The pinned automation version no longer exists.'));
  if (ctx.status !== 'active') return refuse('automation failed: the automation is disabled', new InvalidState('The automation is disabled.'));
  if (!hasFeature(ctx.tier, 'automations')) return refuse(`automation failed: the project's tier (${ctx.tier}) does not run Automations`);
  const quotas = automationQuotas({ tier: ctx.tier, customQuotas: ctx.custom_quotas });
  if (enforcing(rt)) {
    const usage = (ctx.usage ?? {}) as Record<string, string | number>;
    for (const quota of MONTHLY_QUOTAS) {
      const current = Number(usage[MONTHLY_METRIC[quota]] ?? 0);
      if (current >= quotas[quota]) {
        const err = new QuotaExceeded({ quota, scope: 'project', limit: quotas[quota], current, delta: 1, retryAfterSec: secondsToNextUtcMonth() });
        return refuse(`automation failed: the monthly ${quota} quota is used up (${current} of ${quotas[quota]})`, err);
      }
    }
  }

  const noSlot = (): AutomationOutcome => {
    if (req.mode === 'test') {
      throw new QuotaExceeded({ quota: 'automation_concurrency', scope: 'project', limit: quotas.automation_concurrency, current: quotas.automation_concurrency, delta: 1, retryAfterSec: 1 });
    }
    return { kind: 'wait', runAt: new Date(Date.now() + WAIT_MS + Math.random() * WAIT_MS) };
  };
  // This process never runs more of the project's runs at once than the limit: those beyond it
  // wait as jobs at once (deferred to runAt, jittered), never holding a runner's slot.
  // Likewise when this process's sandbox has a queue as long as its pool (one run per worker):
  // the delivery waits as a job rather than in a runner's slot.
  if (req.mode === 'delivery' && sandboxOf(rt).saturated()) return noSlot();
  const releaseLocal = localSlot(req.projectId, quotas.automation_concurrency);
  if (!releaseLocal) return noSlot();
  try {
    return await runWithLease(rt, req, ctx, quotas.automation_concurrency, noSlot);
  } finally {
    releaseLocal();
  }
}

const localSlots = new Map<string, { active: number }>();

/** One of the project's `limit` slots in this process (a release function), or null at once when all are taken. */
function localSlot(projectId: string, limit: number): (() => void) | null {
  let s = localSlots.get(projectId);
  if (!s) localSlots.set(projectId, (s = { active: 0 }));
  const slots = s;
  if (slots.active >= limit) return null;
  slots.active++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--slots.active === 0) localSlots.delete(projectId);
  };
}

async function runWithLease(
  rt: Rt,
  req: { projectId: string; automationId: string; version: number; event: AutomationEvent; deliveryId: string | null },
  ctx: RunContext,
  limit: number,
  noSlot: () => AutomationOutcome,
): Promise<AutomationOutcome> {
  const lease = newId('alz');
  const { rows: taken } = await rt.db.relaxedPool.query({
    name: 'automation_lease_take',
    text: 'SELECT automation_lease_take($1, $2, $3, $4) AS ok',
    values: [req.projectId, lease, limit, LEASE_TTL_MS],
  });
  if (!taken[0].ok) return noSlot();
  let result: RunResult;
  try {
    result = await sandboxOf(rt).run({
      code: ctx.code,
      eventJson: JSON.stringify(req.event),
      limits: runLimits(ctx.tier),
      allowedHosts: Array.isArray(ctx.egress_allowed_hosts) ? ctx.egress_allowed_hosts : [],
    });
  } catch (err) {
    await releaseLease(rt, lease);
    throw err;
  }
  const runId = newId('run');
  try {
    await recordRun(rt, req, runId, result, lease);
  } catch (err) {
    await releaseLease(rt, lease);
    throw err;
  }
  if (result.status === 'ok' && result.result) {
    const out = result.result;
    if (out.kind === 'drop') return { kind: 'drop', reason: `dropped by automation ${req.automationId} version ${req.version} (run ${runId})`, runId, version: req.version };
    if (out.kind === 'string') return { kind: 'payload', body: Buffer.from(out.value), contentType: 'text/plain; charset=utf-8', runId, version: req.version, value: out.value };
    let value: unknown;
    try {
      value = JSON.parse(out.value);
    } catch {
      return { kind: 'failed', error: `automation failed (error, run ${runId}): the result is not valid JSON`, terminal: true, runId, version: req.version, status: 'error' };
    }
    return { kind: 'payload', body: Buffer.from(out.value), contentType: 'application/json', runId, version: req.version, value };
  }
  const why = STATUS_TEXT[result.status] ?? 'the automation failed';
  return {
    kind: 'failed',
    error: `automation failed (${result.status}, run ${runId}): ${result.status === 'error' ? result.error : why}`,
    // Limits and errors of the code itself are terminal; a failed subrequest (or a failure of the engine) is retried.
    terminal: result.status !== 'error' || !result.retryable,
    runId,
    version: req.version,
    status: result.status,
  };
}

async function releaseLease(rt: Rt, lease: string) {
  await rt.db.relaxedPool.query({ name: 'automation_lease_release', text: 'DELETE FROM automation_leases WHERE id = $1', values: [lease] }).catch((err) => {
    log.warn({ err }, 'could not release an automation lease (it expires by itself)');
  });
}

/** The run's record, its usage (runs, CPU ms, subrequests, log bytes this month) and the release of its lease, in one statement. */
async function recordRun(rt: Rt, req: { projectId: string; automationId: string; version: number; deliveryId: string | null }, runId: string, r: RunResult, lease: string) {
  const cpuMs = Math.ceil(r.cpuMs);
  await rt.db.relaxedPool.query({
    name: 'automation_run_record',
    text: `WITH released AS (
             DELETE FROM automation_leases WHERE id = $14
           ), run AS (
             INSERT INTO automation_runs (id, project_id, automation_id, version, delivery_id, status, cpu_ms, subrequests, logs, log_bytes, logs_truncated, error)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
           )
           INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
           SELECT $2, '', m.metric, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), usage_counter_shard(), m.n
             FROM (VALUES ('automation_runs', 1::bigint), ('automation_cpu_ms', $13::bigint), ('automation_subrequests', $8::bigint), ('automation_log_bytes', $10::bigint)) AS m(metric, n)
           ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value`,
    values: [
      runId, req.projectId, req.automationId, req.version, req.deliveryId, r.status, r.cpuMs, r.subrequests,
      r.logs.replaceAll('\0', '\uFFFD'), r.logBytes, r.logsTruncated, r.error?.replaceAll('\0', '\uFFFD') ?? null, cpuMs, lease,
    ],
  });
}
