import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import { requireFeature } from '../projects/gates.ts';
import { parseInput } from '../validation.ts';

export const RETRY_ON = ['408', '429', '5xx', 'network', 'timeout'] as const;
export type RetryOn = (typeof RETRY_ON)[number];

export interface RetryPolicy {
  maxAttempts: number;
  backoff: 'exponential' | 'linear' | 'fixed';
  initialDelayMs: number;
  maxDelayMs: number;
  jitter: boolean;
  retryOn: RetryOn[];
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 6,
  backoff: 'exponential',
  initialDelayMs: 5000,
  maxDelayMs: 3_600_000,
  jitter: true,
  retryOn: [...RETRY_ON],
}) as RetryPolicy;

export const CONTROL_DEFAULTS = {
  deliveryMode: 'parallel' as const,
  maxInFlight: 10,
  timeoutMs: 10_000,
  defaultDelaySeconds: null,
  throttleRatePerSecond: null,
  customHeaders: {} as Record<string, string>,
};

const MAX_DELAY_CEILING_MS = 86_400_000;

const retryPolicySchema = z
  .object({
    maxAttempts: z.number().int().min(1).max(20),
    backoff: z.enum(['exponential', 'linear', 'fixed']),
    initialDelayMs: z.number().int().min(100).max(3_600_000),
    maxDelayMs: z.number().int().min(100).max(MAX_DELAY_CEILING_MS),
    jitter: z.boolean(),
    retryOn: z.array(z.enum(RETRY_ON)).max(RETRY_ON.length).refine((a) => new Set(a).size === a.length, 'must not repeat values'),
  })
  .partial()
  .strict();

// Names the sender controls; anything that frames or signs the request is ours.
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'webhook-id', 'webhook-timestamp', 'webhook-signature']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const headerMapSchema = z
  .record(z.string().max(4096).refine((v) => !/[\r\n\0]/.test(v), 'must not contain line breaks'))
  .superRefine((h, ctx) => {
    const names = Object.keys(h);
    if (names.length > 50) ctx.addIssue({ code: 'custom', message: 'at most 50 headers' });
    for (const name of names) {
      if (!TOKEN.test(name) || name.length > 256) ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid header name' });
      else if (RESERVED_HEADERS.has(name.toLowerCase())) ctx.addIssue({ code: 'custom', path: [name], message: 'is set by the service and cannot be overridden' });
    }
  });

/** Controls as a caller may send them on create or update (undefined: left out). */
export interface ControlsInput {
  deliveryMode?: string | null;
  maxInFlight?: number | null;
  timeoutMs?: number | null;
  retryPolicy?: unknown;
  defaultDelaySeconds?: number | null;
  throttleRatePerSecond?: number | null;
  customHeaders?: unknown;
}

export interface Controls {
  deliveryMode: 'parallel' | 'strict_fifo';
  maxInFlight: number;
  timeoutMs: number;
  retryPolicy: RetryPolicy;
  defaultDelaySeconds: number | null;
  throttleRatePerSecond: number | null;
  customHeaders: Record<string, string>;
}

function sameMembers(a: unknown, b: readonly string[]): boolean {
  return Array.isArray(a) && a.length === b.length && b.every((x) => a.includes(x));
}

/** True when the policy, with left-out fields at their defaults, is the default policy. */
function isDefaultRetryPolicy(p: unknown): boolean {
  if (p === null || p === undefined) return true;
  if (typeof p !== 'object' || Array.isArray(p)) return false;
  return Object.entries(p).every(([k, v]) => {
    if (!(k in DEFAULT_RETRY_POLICY)) return false;
    const d = DEFAULT_RETRY_POLICY[k as keyof RetryPolicy];
    return Array.isArray(d) ? sameMembers(v, d) : v === d;
  });
}

function isEmptyHeaders(h: unknown): boolean {
  return h === null || h === undefined || (typeof h === 'object' && !Array.isArray(h) && Object.keys(h).length === 0);
}

/**
 * The tier gates of the controls a request sets (403 before any 400, as the contract
 * orders checks): values equal to the defaults are free on every tier.
 */
export function requireControlFeatures(tier: string, input: ControlsInput): void {
  if (!isDefaultRetryPolicy(input.retryPolicy)) requireFeature(tier, 'custom_retry_policy');
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
  return out;
}

export function defaultControls(): Controls {
  return { ...CONTROL_DEFAULTS, customHeaders: {}, retryPolicy: parseRetryPolicy(undefined) };
}
