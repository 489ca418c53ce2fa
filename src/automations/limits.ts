import type { Tier } from '../config.ts';
import type { QuotaName } from '../errors.ts';
import type { AUTOMATION_QUOTA_NAMES } from '../projects/tiers.ts';
import type { RunLimits } from './sandbox.ts';

const MB = 1024 * 1024;
const KB = 1024;

/** The spec's Automation quota table, as data (Free cannot run Automations). Its keys are AUTOMATION_QUOTA_NAMES. */
export type AutomationQuotas = Record<(typeof AUTOMATION_QUOTA_NAMES)[number], number> & AutomationQuotaFields;
interface AutomationQuotaFields {
  automations: number;
  active_automations: number;
  /** Versions per automation. */
  automation_versions: number;
  automation_runs: number;
  automation_cpu_ms: number;
  automation_subrequests: number;
  automation_log_bytes: number;
  /** "Worker creations per day": versions created per UTC day (an automation's creation makes its version 1). */
  automation_worker_creations: number;
  /** Runs at once, across every runner. */
  automation_concurrency: number;
}

const NONE: AutomationQuotas = {
  automations: 0, active_automations: 0, automation_versions: 0, automation_runs: 0, automation_cpu_ms: 0,
  automation_subrequests: 0, automation_log_bytes: 0, automation_worker_creations: 0, automation_concurrency: 0,
};

export const AUTOMATION_QUOTAS: Record<Tier, AutomationQuotas> = {
  free: NONE,
  starter: { automations: 2, active_automations: 1, automation_versions: 20, automation_runs: 5_000, automation_cpu_ms: 250_000, automation_subrequests: 10_000, automation_log_bytes: 10 * MB, automation_worker_creations: 5, automation_concurrency: 1 },
  pro: { automations: 5, active_automations: 3, automation_versions: 30, automation_runs: 25_000, automation_cpu_ms: 1_000_000, automation_subrequests: 50_000, automation_log_bytes: 50 * MB, automation_worker_creations: 10, automation_concurrency: 3 },
  business: { automations: 10, active_automations: 5, automation_versions: 50, automation_runs: 100_000, automation_cpu_ms: 5_000_000, automation_subrequests: 250_000, automation_log_bytes: 100 * MB, automation_worker_creations: 20, automation_concurrency: 5 },
  enterprise: { automations: 50, active_automations: 25, automation_versions: 200, automation_runs: 1_000_000, automation_cpu_ms: 50_000_000, automation_subrequests: 2_000_000, automation_log_bytes: 1024 * MB, automation_worker_creations: 100, automation_concurrency: 25 },
};

/** The spec's per-run table: CPU ms, subrequests and log bytes per run. */
const PER_RUN: Record<Tier, { cpuMs: number; subrequests: number; logBytes: number }> = {
  free: { cpuMs: 0, subrequests: 0, logBytes: 0 },
  starter: { cpuMs: 100, subrequests: 5, logBytes: 16 * KB },
  pro: { cpuMs: 250, subrequests: 10, logBytes: 32 * KB },
  business: { cpuMs: 1_000, subrequests: 20, logBytes: 64 * KB },
  enterprise: { cpuMs: 1_000, subrequests: 20, logBytes: 64 * KB },
};

/** The same on every tier (the spec names none): the QuickJS heap, its stack, a run's wall time, one subrequest's timeout. */
export const RUN_MEMORY_BYTES = 32 * MB;
export const RUN_STACK_BYTES = 512 * KB;
export const RUN_WALL_MS = 10_000;
export const SUBREQUEST_TIMEOUT_MS = 5_000;
/** Most bytes of code in one version. */
export const MAX_CODE_BYTES = 256 * KB;

export const MONTHLY_QUOTAS = ['automation_runs', 'automation_cpu_ms', 'automation_subrequests', 'automation_log_bytes'] as const satisfies readonly QuotaName[];
/** The usage_counters metric each monthly quota is counted in (period: the UTC month). */
export const MONTHLY_METRIC: Record<(typeof MONTHLY_QUOTAS)[number], string> = {
  automation_runs: 'automation_runs',
  automation_cpu_ms: 'automation_cpu_ms',
  automation_subrequests: 'automation_subrequests',
  automation_log_bytes: 'automation_log_bytes',
};

/** The project's Automation quotas: its tier's, with an Enterprise project's custom quotas (same names) on top. */
export function automationQuotas(project: { tier: string; customQuotas: unknown }): AutomationQuotas {
  const q = { ...(AUTOMATION_QUOTAS[project.tier as Tier] ?? NONE) };
  if (project.tier === 'enterprise' && project.customQuotas && typeof project.customQuotas === 'object') {
    for (const name of Object.keys(q) as (keyof AutomationQuotas)[]) {
      const v = (project.customQuotas as Record<string, unknown>)[name];
      if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) q[name] = v;
    }
  }
  return q;
}

export function runLimits(tier: string): RunLimits {
  const r = PER_RUN[tier as Tier] ?? PER_RUN.free;
  return {
    cpuMs: r.cpuMs,
    subrequests: r.subrequests,
    logBytes: r.logBytes,
    memoryBytes: RUN_MEMORY_BYTES,
    stackBytes: RUN_STACK_BYTES,
    wallMs: RUN_WALL_MS,
    subrequestTimeoutMs: SUBREQUEST_TIMEOUT_MS,
  };
}
