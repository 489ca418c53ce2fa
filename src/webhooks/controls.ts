import { z } from 'zod';
import { DEFAULT_RETRY_POLICY, isDefaultRetryPolicy, retryPolicyInput, type RetryPolicy } from '../webhook-config/retry-policy.ts';
import { InvalidRequest } from '../errors.ts';
import { requireFeature } from '../projects/gates.ts';
import { parseInput } from '../validation.ts';
import { headerMapSchema } from '../webhook-config/custom-headers.ts';
import { DEFAULT_FORM_ALLOWED_ORIGINS, FORM_ACCESS, parseFormAllowedOrigins, type FormAccess } from '../webhook-config/form-origins.ts';

/** Idempotency keys (CONTRACT §12) are remembered a day by default, a week at most. */
export const DEFAULT_IDEMPOTENCY_WINDOW_SECONDS = 86_400;
export const MAX_IDEMPOTENCY_WINDOW_SECONDS = 604_800;

export const CONTROL_DEFAULTS = {
  deliveryMode: 'parallel' as const,
  maxInFlight: 10,
  timeoutMs: 10_000,
  defaultDelaySeconds: null,
  throttleRatePerSecond: null,
  dedupeWindowSeconds: 0,
  idempotencyWindowSeconds: DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
  formAccess: 'secret' as FormAccess,
};

// The delivery engine's input schema, plus: retryOn must not repeat a value.
const retryPolicySchema = retryPolicyInput.superRefine((p, ctx) => {
  if (p.retryOn && new Set(p.retryOn).size !== p.retryOn.length) ctx.addIssue({ code: 'custom', path: ['retryOn'], message: 'must not repeat values' });
});

/** Inbound deduplication windows go up to a week. */
export const MAX_DEDUPE_WINDOW_SECONDS = 604_800;

/** Controls as a caller may send them on create or update (undefined: left out). */
export interface ControlsInput {
  deliveryMode?: string | null;
  maxInFlight?: number | null;
  timeoutMs?: number | null;
  retryPolicy?: unknown;
  defaultDelaySeconds?: number | null;
  throttleRatePerSecond?: number | null;
  customHeaders?: unknown;
  dedupeWindowSeconds?: number | null;
  idempotencyWindowSeconds?: number | null;
  formAccess?: string | null;
  formAllowedOrigins?: unknown;
}

export interface Controls {
  deliveryMode: 'parallel' | 'strict_fifo';
  maxInFlight: number;
  timeoutMs: number;
  retryPolicy: RetryPolicy;
  defaultDelaySeconds: number | null;
  throttleRatePerSecond: number | null;
  customHeaders: Record<string, string>;
  dedupeWindowSeconds: number;
  idempotencyWindowSeconds: number;
  formAccess: FormAccess;
  formAllowedOrigins: string[];
}

/** True when the policy, with left-out fields at their defaults, is the default policy (free on every tier). */
function retryPolicyIsDefault(raw: unknown): boolean {
  if (raw === null || raw === undefined) return true;
  const parsed = retryPolicyInput.safeParse(raw);
  return parsed.success && isDefaultRetryPolicy({ ...DEFAULT_RETRY_POLICY, ...parsed.data });
}

function isEmptyHeaders(h: unknown): boolean {
  return h === null || h === undefined || (typeof h === 'object' && !Array.isArray(h) && Object.keys(h).length === 0);
}

/**
 * The tier gates of the controls a request sets (403 before any 400, as the contract
 * orders checks): values equal to the defaults are free on every tier.
 */
export function requireControlFeatures(tier: string, input: ControlsInput): void {
  if (!retryPolicyIsDefault(input.retryPolicy)) requireFeature(tier, 'custom_retry_policy');
  if (!isEmptyHeaders(input.customHeaders)) requireFeature(tier, 'custom_headers');
  if (input.deliveryMode === 'strict_fifo') requireFeature(tier, 'strict_fifo');
  if (input.defaultDelaySeconds !== undefined && input.defaultDelaySeconds !== null) requireFeature(tier, 'default_delay');
  if (input.throttleRatePerSecond !== undefined && input.throttleRatePerSecond !== null) requireFeature(tier, 'throttling');
}

function intInRange(value: unknown, param: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new InvalidRequest(`${param} must be an integer.`, param);
  if (value < min || value > max) throw new InvalidRequest(`${param} must be between ${min} and ${max}.`, param);
  return value;
}

/** A retry policy from input: left-out fields take the defaults. */
export function parseRetryPolicy(raw: unknown): RetryPolicy {
  if (raw === null || raw === undefined) return { ...DEFAULT_RETRY_POLICY, retryOn: [...DEFAULT_RETRY_POLICY.retryOn] };
  const given = parseInput(retryPolicySchema, raw, 'retryPolicy');
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, retryOn: [...DEFAULT_RETRY_POLICY.retryOn], ...given };
  // Left out, the 1 h cap gives way to a longer initial delay rather than refusing it.
  if (given.maxDelayMs === undefined) policy.maxDelayMs = Math.max(policy.maxDelayMs, policy.initialDelayMs);
  if (policy.maxDelayMs < policy.initialDelayMs) {
    throw new InvalidRequest('retryPolicy.maxDelayMs must not be below retryPolicy.initialDelayMs.', 'retryPolicy.maxDelayMs');
  }
  return policy;
}

export function parseCustomHeaders(raw: unknown): Record<string, string> {
  if (raw === null || raw === undefined) return {};
  return parseInput(headerMapSchema, raw, 'customHeaders');
}

/**
 * Validates the controls a request sets (400 with `param`) and merges them over `base`
 * (the defaults on create, the stored values on update). `null` resets a control.
 */
export function resolveControls(input: ControlsInput, base: Controls): Controls {
  const out: Controls = { ...base };
  if (input.deliveryMode !== undefined) {
    if (input.deliveryMode !== 'parallel' && input.deliveryMode !== 'strict_fifo') {
      throw new InvalidRequest('deliveryMode must be parallel or strict_fifo.', 'deliveryMode');
    }
    out.deliveryMode = input.deliveryMode;
  }
  if (input.maxInFlight !== undefined) out.maxInFlight = intInRange(input.maxInFlight, 'maxInFlight', 1, 100);
  if (input.timeoutMs !== undefined) out.timeoutMs = intInRange(input.timeoutMs, 'timeoutMs', 1000, 60_000);
  if (input.retryPolicy !== undefined) out.retryPolicy = parseRetryPolicy(input.retryPolicy);
  if (input.defaultDelaySeconds !== undefined) {
    out.defaultDelaySeconds = input.defaultDelaySeconds === null ? null : intInRange(input.defaultDelaySeconds, 'defaultDelaySeconds', 0, 604_800);
  }
  if (input.throttleRatePerSecond !== undefined) {
    out.throttleRatePerSecond = input.throttleRatePerSecond === null ? null : intInRange(input.throttleRatePerSecond, 'throttleRatePerSecond', 1, 1000);
  }
  if (input.customHeaders !== undefined) out.customHeaders = parseCustomHeaders(input.customHeaders);
  if (input.dedupeWindowSeconds !== undefined) {
    out.dedupeWindowSeconds = input.dedupeWindowSeconds === null ? 0 : intInRange(input.dedupeWindowSeconds, 'dedupeWindowSeconds', 0, MAX_DEDUPE_WINDOW_SECONDS);
  }
  if (input.idempotencyWindowSeconds !== undefined) {
    out.idempotencyWindowSeconds =
      input.idempotencyWindowSeconds === null ? DEFAULT_IDEMPOTENCY_WINDOW_SECONDS : intInRange(input.idempotencyWindowSeconds, 'idempotencyWindowSeconds', 0, MAX_IDEMPOTENCY_WINDOW_SECONDS);
  }
  if (input.formAccess !== undefined) {
    if (input.formAccess !== null && !FORM_ACCESS.includes(input.formAccess as FormAccess)) throw new InvalidRequest('formAccess must be secret or public.', 'formAccess');
    out.formAccess = (input.formAccess ?? 'secret') as FormAccess;
  }
  if (input.formAllowedOrigins !== undefined) out.formAllowedOrigins = parseFormAllowedOrigins(input.formAllowedOrigins);
  return out;
}

export function defaultControls(): Controls {
  return { ...CONTROL_DEFAULTS, customHeaders: {}, retryPolicy: parseRetryPolicy(undefined), formAllowedOrigins: [...DEFAULT_FORM_ALLOWED_ORIGINS] };
}
