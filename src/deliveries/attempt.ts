import { inTransaction } from '../db/client.ts';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { decryptSecret } from '../secrets.ts';
import { claimDelivery, requeueJob, type ClaimedDelivery } from './claim.ts';
import type { OutboundClient, OutboundResult } from './outbound-http.ts';
import { recordAttempt, type AttemptResult } from './record.ts';
import { isRetryable, normalizeRetryPolicy, retryDelayMs, type FailureKind } from './retry-policy.ts';
import { signingHeaders } from './signing.ts';
import { applyTransform } from '../webhooks/transform.ts';

const USER_AGENT = 'webhook-service/1.0 (+standard-webhooks)';
const MAX_RETRY_AFTER_MS = 3_600_000;

export interface DeliveryEngine {
  rt: Runtime;
  outbound: OutboundClient;
}

/** The graphile-worker task body for one delivery job: claim, build, sign, send, record. */
export async function attemptDelivery(engine: DeliveryEngine, deliveryId: string): Promise<void> {
  const { rt } = engine;
  // Claims and results are bookkeeping that is safe to redo (see Database.relaxedPool): their
  // commits must not hold the webhook's in-flight counter while waiting for the disk.
  const outcome = await inTransaction(rt.db.relaxedPool, async (client) => {
    const o = await claimDelivery(client, deliveryId);
    if (o.kind === 'later') await requeueJob(client, deliveryId, o.runAt);
    return o;
  });
  if (outcome.kind !== 'claimed') return;
  const claim = outcome.claim;
  if (claim.lostPrevious) await recordLostAttempt(engine, claim);

  const policy = normalizeRetryPolicy(claim.webhook.retryPolicy);
  const startedAt = new Date();
  const base = { deliveryId, attempt: claim.attempt, startedAt };

  let dispatch: Dispatch;
  try {
    dispatch = await buildDispatch(claim);
  } catch (err) {
    await recordAttempt(rt.db.relaxedPool, { ...base, durationMs: 0, statusCode: null, responseSnippet: null, error: (err as Error).message, outcome: 'failed' });
    return;
  }

  const destination = claim.row.destination ?? {};
  if ((destination.type ?? 'webhook') !== 'webhook') {
    await recordAttempt(rt.db.relaxedPool, {
      ...base,
      durationMs: 0,
      statusCode: null,
      responseSnippet: null,
      error: `destination type ${destination.type} has no sender in this deployment`,
      outcome: 'failed',
      dispatch: snapshotToStore(claim, dispatch),
    });
    return;
  }
  const url: string = destination.config?.url ?? destination.url;
  const secrets = claim.signingSecretsEnc.map(decryptSecret);
  const headers: Record<string, string> = {
    'user-agent': USER_AGENT,
    ...dispatch.headers,
    ...signingHeaders(secrets, claim.row.event_id, dispatch.body),
  };
  const res = await engine.outbound.send({
    url,
    method: destination.config?.method ?? 'POST',
    headers,
    body: dispatch.body,
    timeoutMs: claim.webhook.timeoutMs,
  });
  const result = classify(res, policy, claim.attempt);
  await recordAttempt(rt.db.relaxedPool, {
    ...base,
    ...result,
    durationMs: res.durationMs,
    statusCode: res.statusCode ?? null,
    responseSnippet: res.snippet ?? null,
    dispatch: snapshotToStore(claim, dispatch),
  });
}

interface Dispatch {
  body: Buffer;
  contentType: string | null;
  headers: Record<string, string>;
  /** The body differs from the event's payload (a transform ran): it must be kept for replays. */
  transformed: boolean;
}

/**
 * The dispatch snapshot is written once, by the first attempt: its headers always, its body
 * only when a transform produced it (otherwise the retained event payload is those bytes).
 */
function snapshotToStore(claim: ClaimedDelivery, d: Dispatch): AttemptResult['dispatch'] {
  if (claim.hasDispatch || claim.dispatchHeaders) return null;
  return { body: d.transformed ? d.body : null, contentType: d.contentType, headers: d.headers };
}

/** The bytes and headers to send: the stored dispatch snapshot, else the event payload (transformed when a transform is set). */
async function buildDispatch(claim: ClaimedDelivery): Promise<Dispatch> {
  if (claim.body === null) throw new Error('the retained payload is gone');
  if (claim.hasDispatch || claim.dispatchHeaders) {
    return {
      body: claim.body,
      contentType: claim.contentType,
      headers: claim.dispatchHeaders ?? (claim.contentType ? { 'content-type': claim.contentType } : {}),
      transformed: claim.hasDispatch,
    };
  }
  let body = claim.body;
  let contentType = claim.contentType;
  let transformed = false;
  const transform = claim.webhook.transform;
  if (transform?.kind === 'jsonata' && typeof transform.expression === 'string') {
    ({ body, contentType } = await applyTransform(transform, body));
    transformed = true;
  }
  const destHeaders = (claim.row.destination?.config?.headers ?? {}) as Record<string, string>;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...claim.webhook.customHeaders, ...destHeaders })) headers[k.toLowerCase()] = String(v);
  if (contentType) headers['content-type'] = contentType;
  return { body, contentType, headers, transformed };
}

function classify(res: OutboundResult, policy: ReturnType<typeof normalizeRetryPolicy>, attempt: number): Pick<AttemptResult, 'outcome' | 'error' | 'nextAttemptAt'> {
  if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) return { outcome: 'succeeded', error: null };
  let failure: FailureKind;
  let error: string | null = res.error ?? null;
  if (res.failure === 'blocked') failure = { kind: 'terminal' };
  else if (res.failure === 'timeout') failure = { kind: 'timeout' };
  else if (res.failure === 'network') failure = { kind: 'network' };
  else {
    failure = { kind: 'status', status: res.statusCode! };
    if (res.statusCode! >= 300 && res.statusCode! < 400) error = `redirect (HTTP ${res.statusCode}) not followed`;
    else error = `HTTP ${res.statusCode}`;
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

/** A runner died during the previous attempt: record it as a lost (network) attempt before going on. */
async function recordLostAttempt(engine: DeliveryEngine, claim: ClaimedDelivery) {
  try {
    await engine.rt.db.pool.query(
      `INSERT INTO delivery_attempts (id, delivery_id, number, started_at, duration_ms, status_code, error, outcome)
       VALUES ($1, $2, $3, now(), NULL, NULL, 'attempt interrupted: the runner stopped before it finished', 'retry')
       ON CONFLICT (delivery_id, number) DO NOTHING`,
      [newId('att'), claim.row.id, claim.attempt - 1],
    );
  } catch (err) {
    log.warn({ err, deliveryId: claim.row.id }, 'could not record the lost attempt');
  }
}
