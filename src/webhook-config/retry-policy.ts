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
