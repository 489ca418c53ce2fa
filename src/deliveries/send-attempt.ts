import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { decryptSecret } from '../encryption.ts';
import { tracingEnabled, withSpan } from '../tracing.ts';
import { classifyAnswer, normalizeRetryPolicy, retryableAutomationFailure, retryDelayMs, type RetryPolicy } from '../webhook-config/retry-policy.ts';
import type { ClaimedDelivery } from './claim.ts';
import { deferClaim } from './defer.ts';
import { buildDispatch, snapshotToStore, type Dispatch } from './dispatch.ts';
import type { DeliveryEngine } from './engine.ts';
import type { AttemptResult } from './record.ts';
import { signingHeaders } from './signing.ts';

/** Normalised once per webhook object: a batch's claims share theirs. */
const retryPolicies = new WeakMap<ClaimedDelivery['webhook'], RetryPolicy>();
function retryPolicyOf(webhook: ClaimedDelivery['webhook']): RetryPolicy {
  let policy = retryPolicies.get(webhook);
  if (!policy) retryPolicies.set(webhook, (policy = normalizeRetryPolicy(webhook.retryPolicy)));
  return policy;
}

const decryptedSecrets = new Map<string, string>();
function signingSecret(sealed: string): string {
  let secret = decryptedSecrets.get(sealed);
  if (secret === undefined) {
    if (decryptedSecrets.size >= 1_000) decryptedSecrets.clear();
    secret = decryptSecret(sealed);
    decryptedSecrets.set(sealed, secret);
  }
  return secret;
}

/** sendClaimed inside a `delivery.attempt` span when tracing is on (src/tracing.ts). */
export function sendTraced(engine: DeliveryEngine, claim: ClaimedDelivery, answered?: () => void): Promise<void> {
  if (!tracingEnabled()) return sendClaimed(engine, claim, answered);
  const attributes = { 'relay.delivery_id': claim.row.id, 'relay.event_id': claim.row.event_id, 'relay.webhook_id': claim.row.webhook_id, 'relay.attempt': claim.attempt };
  return withSpan('delivery.attempt', attributes, () => sendClaimed(engine, claim, answered));
}

/**
 * Builds, signs and sends one claimed delivery, then records the attempt. `answered` is told as
 * soon as the attempt holds no request open any more (before its result is written): a drain
 * hands the slot to its next attempt then.
 */
async function sendClaimed(engine: DeliveryEngine, claim: ClaimedDelivery, answered?: () => void): Promise<void> {
  const record = async (r: AttemptResult) => {
    answered?.();
    return engine.recorder.record(r);
  };
  const policy = retryPolicyOf(claim.webhook);
  const startedAt = new Date();
  const base = { deliveryId: claim.row.id as string, delivery: claim.row, attempt: claim.attempt, startedAt };

  let dispatch: Dispatch;
  try {
    const built = await buildDispatch(engine, claim);
    if (built.kind === 'wait') {
      // Every Automation slot of the project is taken: the delivery goes back to waiting, as a job at runAt (this runner's slot is free meanwhile).
      answered?.();
      await deferClaim(engine.rt.db.relaxedPool, claim.row.id, claim.attempt, built.runAt);
      return;
    }
    if (built.kind === 'drop') {
      await record({ ...base, durationMs: built.durationMs, statusCode: null, responseSnippet: null, error: built.reason, outcome: 'cancelled', automation: built.automation });
      return;
    }
    if (built.kind === 'failed') {
      const retry = !built.terminal && retryableAutomationFailure(policy, claim.attempt);
      await record({
        ...base,
        durationMs: built.durationMs,
        statusCode: null,
        responseSnippet: null,
        error: built.error,
        outcome: retry ? 'retry' : 'failed',
        ...(retry ? { nextAttemptAt: new Date(Date.now() + retryDelayMs(policy, claim.attempt + 1)) } : {}),
        automation: built.automation,
      });
      return;
    }
    dispatch = built.dispatch;
  } catch (err) {
    await record({ ...base, durationMs: 0, statusCode: null, responseSnippet: null, error: (err as Error).message, outcome: 'failed' });
    return;
  }

  const res = await engine.senders.send(claim.row.destination ?? { id: '', name: '', type: 'webhook', config: {} }, {
    dispatch,
    signing: signingHeaders(claim.signingSecretsEnc.map(signingSecret), claim.row.event_id, dispatch.body),
    timeoutMs: claim.webhook.timeoutMs,
    ids: { deliveryId: claim.row.id, eventId: claim.row.event_id, webhookId: claim.row.webhook_id },
  });
  // The Automation run's record, written while the body was sent, before the attempt's.
  await dispatch.automationRecorded;
  await record({
    ...base,
    // Interrupted by this runner's stop: not the receiver's answer, so always tried again at once
    // (by the next runner), whatever the policy and however many attempts it has had, as an
    // attempt lost with its runner is (claim.ts).
    ...(res.interrupted ? { outcome: 'retry' as const, error: res.error ?? ATTEMPT_INTERRUPTED, nextAttemptAt: new Date(), failure: 'network' as const } : classifyAnswer(res, policy, claim.attempt)),
    durationMs: res.durationMs,
    statusCode: res.statusCode ?? null,
    responseSnippet: res.snippet ?? null,
    dispatch: snapshotToStore(claim, dispatch),
    automation: dispatch.automation ?? null,
  });
}

/** What an attempt ended by its runner's stop (or lost with its runner) says: it is retried. */
export const ATTEMPT_INTERRUPTED = 'attempt interrupted: the runner stopped before it finished';

/** A runner died during the previous attempt: record it as a lost (network) attempt before going on. */
export async function recordLostAttempt(engine: DeliveryEngine, claim: ClaimedDelivery) {
  try {
    await engine.rt.db.pool.query(
      `INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, duration_ms, status_code, error, outcome)
       VALUES ($1, $2, $3, $4, now(), NULL, NULL, $5, 'retry')
       ON CONFLICT (delivery_id, number) DO NOTHING`,
      [newId('att'), claim.row.project_id, claim.row.id, claim.attempt - 1, ATTEMPT_INTERRUPTED],
    );
  } catch (err) {
    log.warn({ err, deliveryId: claim.row.id }, 'could not record the lost attempt');
  }
}
