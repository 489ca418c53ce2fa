import { isThrottlingError } from '@smithy/core/retry';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { BlockedAddress, guardedAgents } from '../../outbound/address-guard.ts';
import type { OutboundResult } from '../../outbound/http-client.ts';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/**
 * The settings every AWS client of a destination shares: one attempt per delivery attempt (the
 * webhook's retry policy does the retrying, and a call stays within the delivery's lease),
 * connections through agents that refuse private addresses, and the SDK's default credential
 * chain when the destination has no credentials of its own.
 */
export function awsClientConfig(opts: { region: string; endpoint?: string; credentials: AwsCredentials | null; allowPrivate: boolean }) {
  return {
    region: opts.region,
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({ ...guardedAgents(opts.allowPrivate), throwOnRequestTimeout: true }),
  };
}

/** Per-call options: the webhook's timeout bounds the whole call, connection included. */
export function awsCallOptions(timeoutMs: number) {
  return { abortSignal: AbortSignal.timeout(timeoutMs), requestTimeout: timeoutMs };
}

/** The HTTP status the service answered with, if it answered. */
export function awsStatus(output: { $metadata?: { httpStatusCode?: number } }): number | undefined {
  return output.$metadata?.httpStatusCode;
}

/**
 * An SDK error as an attempt result. The service's answer keeps its status, except that
 * throttling answered with a 4xx (several AWS JSON services say 400 ThrottlingException) is
 * recorded as 429, so the retry policy retries it as it retries an HTTP 429.
 */
export function awsFailure(operation: string, err: unknown, durationMs: number, timeoutMs: number): OutboundResult {
  const e = err as Error & {
    $metadata?: { httpStatusCode?: number };
    $response?: { headers?: Record<string, string> };
    $fault?: string;
    Code?: string;
    code?: string;
    cause?: unknown;
  };
  if (e instanceof BlockedAddress || e?.cause instanceof BlockedAddress) {
    return { durationMs, error: `${operation}: ${e.message}`, failure: 'blocked' };
  }
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError') {
    return { durationMs, error: `${operation}: timed out after ${timeoutMs} ms`, failure: 'timeout' };
  }
  const status = e?.$metadata?.httpStatusCode;
  if (status !== undefined && e.$response) {
    const code = e.Code ?? e.name;
    let statusCode = status;
    if (status < 500 && status !== 429 && isThrottlingError(e as Parameters<typeof isThrottlingError>[0])) statusCode = 429;
    const headers = e.$response.headers?.['retry-after'] ? { 'retry-after': e.$response.headers['retry-after'] } : undefined;
    const noted = statusCode === status ? '' : `, recorded as ${statusCode}`;
    return { durationMs, statusCode, headers, error: `${operation}: ${code}: ${e.message} (HTTP ${status}${noted})`, snippet: code };
  }
  const code = e?.code ?? e?.name ?? 'Error';
  return { durationMs, error: `${operation}: ${code}: ${e?.message ?? String(err)}`, failure: 'network' };
}
