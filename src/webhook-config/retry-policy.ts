import { z } from 'zod';

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

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 6,
  backoff: 'exponential',
  initialDelayMs: 5000,
  maxDelayMs: 3_600_000,
  jitter: true,
  retryOn: ['408', '429', '5xx', 'network', 'timeout'],
};

/** The contract's retryPolicy input: fields left out take their defaults. */
export const retryPolicyInput = z
  .object({
    maxAttempts: z.number().int().min(1).max(20),
    backoff: z.enum(['exponential', 'linear', 'fixed']),
    initialDelayMs: z.number().int().min(100).max(3_600_000),
    maxDelayMs: z.number().int().min(100).max(86_400_000),
    jitter: z.boolean(),
    retryOn: z.array(z.enum(RETRY_ON)).max(5),
  })
  .partial()
  .strict();

export function normalizeRetryPolicy(input: unknown): RetryPolicy {
  const parsed = retryPolicyInput.safeParse(input ?? {});
  const p = { ...DEFAULT_RETRY_POLICY, ...(parsed.success ? parsed.data : {}) };
  if (p.maxDelayMs < p.initialDelayMs) p.maxDelayMs = p.initialDelayMs;
  return p;
}

export function isDefaultRetryPolicy(p: RetryPolicy): boolean {
  const d = DEFAULT_RETRY_POLICY;
  return (
    p.maxAttempts === d.maxAttempts &&
    p.backoff === d.backoff &&
    p.initialDelayMs === d.initialDelayMs &&
    p.maxDelayMs === d.maxDelayMs &&
    p.jitter === d.jitter &&
    [...p.retryOn].sort().join() === [...d.retryOn].sort().join()
  );
}

/** Delay before attempt `nextAttempt` (2 = first retry). */
export function retryDelayMs(p: RetryPolicy, nextAttempt: number, random = Math.random): number {
  const n = Math.max(1, nextAttempt - 1);
  let delay = p.backoff === 'fixed' ? p.initialDelayMs : p.backoff === 'linear' ? p.initialDelayMs * n : p.initialDelayMs * 2 ** (n - 1);
  delay = Math.min(delay, p.maxDelayMs);
  // Full jitter in [50%, 100%] keeps retries of a failed burst from arriving together.
  if (p.jitter) delay = Math.round(delay * (0.5 + random() * 0.5));
  return delay;
}

export type FailureKind = { kind: 'status'; status: number } | { kind: 'network' } | { kind: 'timeout' } | { kind: 'terminal' };

export function isRetryable(p: RetryPolicy, f: FailureKind): boolean {
  switch (f.kind) {
    case 'network':
      return p.retryOn.includes('network');
    case 'timeout':
      return p.retryOn.includes('timeout');
    case 'terminal':
      return false;
    case 'status':
      if (f.status === 408) return p.retryOn.includes('408');
      if (f.status === 429) return p.retryOn.includes('429');
      if (f.status >= 500 && f.status <= 599) return p.retryOn.includes('5xx');
      return false;
  }
}

/** Longest a receiver's Retry-After may push the next attempt back. */
const MAX_RETRY_AFTER_MS = 3_600_000;

/** A receiver's answer (or its absence), as the delivery engine's senders report it. */
export interface AttemptAnswer {
  statusCode?: number;
  headers?: Record<string, string | string[] | undefined>;
  error?: string;
  /** Why no status code came back: a network error, a timeout, or a blocked address. */
  failure?: 'network' | 'timeout' | 'blocked';
}

/** What an answer means for its delivery under a policy: success, a retry at nextAttemptAt, or failure (to the DLQ). */
export interface AttemptVerdict {
  outcome: 'succeeded' | 'retry' | 'failed';
  error: string | null;
  nextAttemptAt?: Date;
  failure?: 'network' | 'timeout' | 'blocked';
}

/**
 * Classifies attempt number `attempt`'s answer by the policy: 2xx succeeds; a redirect is not
 * followed; a retryable failure (retryOn) with attempts left is retried after the policy's delay,
 * or after the receiver's Retry-After on 429/503 when that is longer (at most an hour).
 */
export function classifyAnswer(res: AttemptAnswer, policy: RetryPolicy, attempt: number): AttemptVerdict {
  const verdict = classifyOutcome(res, policy, attempt);
  return res.failure ? { ...verdict, failure: res.failure } : verdict;
}

function classifyOutcome(res: AttemptAnswer, policy: RetryPolicy, attempt: number): AttemptVerdict {
  if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) return { outcome: 'succeeded', error: null };
  let failure: FailureKind;
  let error: string | null = res.error ?? null;
  if (res.failure === 'blocked') failure = { kind: 'terminal' };
  else if (res.failure === 'timeout') failure = { kind: 'timeout' };
  else if (res.failure === 'network') failure = { kind: 'network' };
  else {
    failure = { kind: 'status', status: res.statusCode! };
    if (res.statusCode! >= 300 && res.statusCode! < 400) error = `redirect (HTTP ${res.statusCode}) not followed`;
    else error = res.error ?? `HTTP ${res.statusCode}`;
  }
  if (!isRetryable(policy, failure) || attempt >= policy.maxAttempts) return { outcome: 'failed', error };
  let delay = retryDelayMs(policy, attempt + 1);
  const retryAfter = res.headers?.['retry-after'];
  if (retryAfter && (res.statusCode === 429 || res.statusCode === 503)) {
    const seconds = Number(retryAfter);
    const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(String(retryAfter)) - Date.now();
    if (Number.isFinite(ms) && ms > 0) delay = Math.min(Math.max(delay, ms), MAX_RETRY_AFTER_MS);
  }
  return { outcome: 'retry', error, nextAttemptAt: new Date(Date.now() + delay) };
}

/** A failed subrequest of an Automation is retried like a network failure, within the policy's attempts. */
export function retryableAutomationFailure(policy: RetryPolicy, attempt: number): boolean {
  return isRetryable(policy, { kind: 'network' }) && attempt < policy.maxAttempts;
}
