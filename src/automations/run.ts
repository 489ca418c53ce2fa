import { InvalidState, QuotaExceeded } from '../errors.ts';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { hasFeature } from '../projects/gates.ts';
import { enforcing } from '../projects/quotas/limits.ts';
import { bodyFields, providerEventType } from '../providers/index.ts';
import type { Runtime } from '../runtime.ts';
import { automationQuotas, MONTHLY_METRIC, MONTHLY_QUOTAS, runLimits } from './limits.ts';
import { RunRecorder, type RunRecord } from './run-records.ts';
import type { RunResult } from './sandbox.ts';
import { sandboxOf } from './sandbox-instance.ts';
import { SlotPool, type Slot } from './slots.ts';

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
  /** The webhook's provider pack (`stripe`, `github`, …), or null: as in the routing context (CONTRACT §10). */
  provider?: string | null;
  /** The event type as the provider names it, or null. */
  eventType?: string | null;
}

export type AutomationOutcome =
  /**
   * The bytes to deliver. `recorded` settles once the run's record is written (it is written
   * while the payload is sent: wait for it before recording the attempt); it never rejects.
   */
  | { kind: 'payload'; body: Buffer; contentType: string; runId: string; version: number; value: unknown; recorded: Promise<void> }
  /** The code returned null: the delivery ends `cancelled`. */
  | { kind: 'drop'; reason: string; runId: string; version: number }
  /** The run failed (or could not run): `terminal` ends the delivery, else the retry policy decides. */
  | { kind: 'failed'; error: string; terminal: boolean; runId: string | null; version: number; status: string }
  /** Every concurrency slot of the project is taken: try again at `runAt` (a job, not a held runner). */
  | { kind: 'wait'; runAt: Date };

// Every statement here goes through the relaxed pool (commits that do not wait for the disk):
// a lease or run record lost with a database crash costs at most a lease that expires and a
// run missing from the list (its delivery's attempt is made again, as every lost result is).

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
  /** The webhook's provider pack's provider (delivery runs; null without a pack). */
  provider: string | null;
  /** What this process's runs added to the monthly usage since `usage` was read (not in it yet). */
  local: Record<string, number>;
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
/** Reads under way: the runs that find the context stale at the same moment share one read. */
const reading = new Map<string, Promise<RunContext | null>>();

async function runContext(rt: Rt, req: { projectId: string; automationId: string; version: number; webhookId?: string | null; mode: 'delivery' | 'test' }): Promise<RunContext | null> {
  const key = `${req.projectId}:${req.automationId}:${req.version}:${req.webhookId ?? ''}`;
  const cached = contexts.get(key);
  // test-delivery (interactive, rare) always reads afresh.
  if (req.mode === 'test') return readContext(rt, req, key);
  if (cached && Date.now() - cached.at < CONTEXT_TTL_MS) return cached.ctx;
  let read = reading.get(key);
  if (!read) {
    read = readContext(rt, req, key).finally(() => reading.delete(key));
    reading.set(key, read);
  }
  return read;
}

async function readContext(rt: Rt, req: { projectId: string; automationId: string; version: number; webhookId?: string | null }, key: string): Promise<RunContext | null> {
  const { rows } = await rt.db.relaxedPool.query({
    name: 'automation_run_context',
    text: `SELECT a.status, v.code, p.tier, p.custom_quotas, p.egress_allowed_hosts,
                  (SELECT json_object_agg(u.metric, u.total) FROM (
                     SELECT metric, sum(value)::bigint AS total FROM usage_counters
                      WHERE project_id = $1 AND webhook_id = '' AND period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AND metric = ANY($4::text[])
                      GROUP BY metric) u) AS usage,
                  (SELECT w.provider_pack->>'provider' FROM webhooks w WHERE w.id = $5 AND w.project_id = $1) AS provider
             FROM automations a
             JOIN automation_versions v ON v.automation_id = a.id AND v.version = $3
             JOIN projects p ON p.id = a.project_id
            WHERE a.id = $2 AND a.project_id = $1`,
    values: [req.projectId, req.automationId, req.version, Object.values(MONTHLY_METRIC), req.webhookId ?? null],
  });
  const ctx = rows[0] ? ({ ...rows[0], local: {} } as RunContext) : null;
  if (contexts.size >= 1_000) contexts.clear();
  contexts.set(key, { at: Date.now(), ctx });
  return ctx;
}

/** Forgets what runContext read (tests and management changes that must show at once in this process). */
export function forgetRunContexts(): void {
  contexts.clear();
}

/** This process's concurrency slots and run recorder, per database (a test may run two runners in one process). */
const perDatabase = new WeakMap<object, { slots: SlotPool; recorder: RunRecorder }>();
function shared(rt: Rt) {
  let s = perDatabase.get(rt.db.relaxedPool);
  if (!s) perDatabase.set(rt.db.relaxedPool, (s = { slots: new SlotPool(rt.db.relaxedPool), recorder: new RunRecorder(rt.db.relaxedPool) }));
  return s;
}

/** Which project, and its concurrency limit, the webhook's runs were last made for in this process. */
const webhookRuns = new Map<string, { projectId: string; limit: number; at: number }>();
/**
 * How long that stays a hint. Long enough to span the pauses between a webhook's bursts (a drain
 * that starts without it claims as for a plain webhook, and sends most of its claims back);
 * after a transform is removed, the webhook's drains claim at most the old limit at a time for
 * this long.
 */
const WEBHOOK_RUNS_TTL_MS = 30_000;

/**
 * How many more deliveries of the webhook this process could start the Automation run of now,
 * so that a drain claims no more than can run (the others would only be sent back to wait as
 * jobs): the project's concurrency slots this process does not use (optimistic about other
 * processes). Infinity for a webhook whose runs this process has not made lately (no
 * Automation, or none yet: the first claim tells). At least 1 when `inFlight` is 0, so a drain
 * never stops for it. (Not bounded by the sandbox's queue: a drain wakes when a delivery is
 * done, not when its run is, so that bound would starve it; saturated() defers what the
 * sandbox would take too long to start.)
 */
export function automationRoom(rt: Rt, webhookId: string | null | undefined, inFlight: number): number {
  const w = webhookId ? webhookRuns.get(webhookId) : undefined;
  if (!w || Date.now() - w.at > WEBHOOK_RUNS_TTL_MS) return Infinity;
  const room = shared(rt).slots.room(w.projectId, w.limit);
  return inFlight === 0 ? Math.max(1, room) : room;
}

/**
 * Runs the pinned version of an automation over one event, with the project's limits: the
 * deployment switch, the automation's state, the monthly quotas (usage counters, plus this
 * process's runs since they were read), a concurrency slot (counted in PostgreSQL across every
 * runner: see slots.ts), then the sandbox. The run is recorded (automation_runs) and counted
 * (usage_counters) by the RunRecorder, many runs per statement.
 *
 * `webhookId` (delivery runs) fills the event's `provider` and `eventType` from the webhook's
 * provider pack, read from `rawBody` (the payload's bytes) as ingest reads them.
 *
 * `mode: 'test'` (test-delivery) answers refusals as errors (409/429) rather than outcomes.
 */
export async function runAutomation(
  rt: Rt,
  req: {
    projectId: string;
    automationId: string;
    version: number;
    event: AutomationEvent;
    deliveryId: string | null;
    mode: 'delivery' | 'test';
    webhookId?: string | null;
    rawBody?: Buffer | null;
  },
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
      const current = Number(usage[MONTHLY_METRIC[quota]] ?? 0) + (ctx.local[MONTHLY_METRIC[quota]] ?? 0);
      if (current >= quotas[quota]) {
        const err = new QuotaExceeded({ quota, scope: 'project', limit: quotas[quota], current, delta: 1, retryAfterSec: secondsToNextUtcMonth() });
        return refuse(`automation failed: the monthly ${quota} quota is used up (${current} of ${quotas[quota]})`, err);
      }
    }
  }
  if (req.mode === 'delivery' && req.webhookId) {
    if (webhookRuns.size >= 10_000) webhookRuns.clear();
    webhookRuns.set(req.webhookId, { projectId: req.projectId, limit: quotas.automation_concurrency, at: Date.now() });
  }

  const noSlot = (): AutomationOutcome => {
    if (req.mode === 'test') {
      throw new QuotaExceeded({ quota: 'automation_concurrency', scope: 'project', limit: quotas.automation_concurrency, current: quotas.automation_concurrency, delta: 1, retryAfterSec: 1 });
    }
    return { kind: 'wait', runAt: new Date(Date.now() + WAIT_MS + Math.random() * WAIT_MS) };
  };
  // Runs beyond the project's concurrency wait as jobs at once (deferred to runAt, jittered),
  // never holding a runner's slot. Likewise when this process's sandbox has a queue it would
  // take long to work through (one run per worker): the delivery waits as a job.
  if (req.mode === 'delivery' && sandboxOf(rt).saturated()) return noSlot();
  const slot = await shared(rt).slots.acquire(req.projectId, quotas.automation_concurrency);
  if (!slot) return noSlot();
  let result: RunResult;
  try {
    result = await sandboxOf(rt).run({
      code: ctx.code,
      eventJson: JSON.stringify(withProvider(req, ctx)),
      limits: runLimits(ctx.tier),
      allowedHosts: Array.isArray(ctx.egress_allowed_hosts) ? ctx.egress_allowed_hosts : [],
    });
  } finally {
    slot.release();
  }
  const runId = newId('run');
  countLocally(ctx, result);
  const recorded = shared(rt).recorder.record(runRecord(req, runId, result));
  return outcomeOf(req, runId, result, recorded);
}

function withProvider(req: { event: AutomationEvent; rawBody?: Buffer | null }, ctx: RunContext): AutomationEvent {
  if (req.event.provider !== undefined) return req.event;
  const provider = ctx.provider ?? null;
  const e = req.event;
  const fields = () => (req.rawBody ? bodyFields(req.rawBody, e.contentType) : e.body);
  const eventType = provider ? providerEventType({ provider, secretEnc: '', toleranceSeconds: null }, e.headers, fields) : null;
  return { ...e, provider, eventType };
}

function countLocally(ctx: RunContext, r: RunResult) {
  const add = (metric: string, n: number) => (ctx.local[metric] = (ctx.local[metric] ?? 0) + n);
  add(MONTHLY_METRIC.automation_runs, 1);
  add(MONTHLY_METRIC.automation_cpu_ms, Math.ceil(r.cpuMs));
  add(MONTHLY_METRIC.automation_subrequests, r.subrequests);
  add(MONTHLY_METRIC.automation_log_bytes, r.logBytes);
}

function runRecord(req: { projectId: string; automationId: string; version: number; deliveryId: string | null }, runId: string, r: RunResult): RunRecord {
  return {
    id: runId,
    projectId: req.projectId,
    automationId: req.automationId,
    version: req.version,
    deliveryId: req.deliveryId,
    status: r.status,
    cpuMs: r.cpuMs,
    subrequests: r.subrequests,
    logs: r.logs,
    logBytes: r.logBytes,
    logsTruncated: r.logsTruncated,
    error: r.error ?? null,
  };
}

/**
 * The run's outcome. A delivery's payload goes out while its record is written (the attempt
 * waits for `recorded` before it is recorded); every other outcome, and every test-delivery
 * run, waits for the record first (a record that cannot be written fails the run as before).
 */
async function outcomeOf(
  req: { automationId: string; version: number; mode: 'delivery' | 'test' },
  runId: string,
  result: RunResult,
  recorded: Promise<void>,
): Promise<AutomationOutcome> {
  if (result.status === 'ok' && result.result && result.result.kind !== 'drop') {
    const out = result.result;
    if (req.mode === 'test') await recorded;
    const written = recorded.catch((err) => log.warn({ err, runId }, 'could not record an automation run (its payload was sent)'));
    if (out.kind === 'string') return { kind: 'payload', body: Buffer.from(out.value), contentType: 'text/plain; charset=utf-8', runId, version: req.version, value: out.value, recorded: written };
    // The sandbox checked that the text is JSON; test-delivery shows the value.
    const value = req.mode === 'test' ? JSON.parse(out.value) : undefined;
    return { kind: 'payload', body: Buffer.from(out.value), contentType: 'application/json', runId, version: req.version, value, recorded: written };
  }
  await recorded;
  if (result.status === 'ok' && result.result?.kind === 'drop') {
    return { kind: 'drop', reason: `dropped by automation ${req.automationId} version ${req.version} (run ${runId})`, runId, version: req.version };
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
