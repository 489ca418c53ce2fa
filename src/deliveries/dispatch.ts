import { log } from '../log.ts';
import { runAutomation, type AutomationOutcome } from '../automations/run.ts';
import { bodyForMatching } from '../routing/rules.ts';
import { storedTransform, transformPayload } from '../webhook-config/transform.ts';
import type { ClaimedDelivery } from './claim.ts';
import type { DeliveryEngine } from './engine.ts';
import type { AttemptResult } from './record.ts';

export interface Dispatch {
  body: Buffer;
  contentType: string | null;
  headers: Record<string, string>;
  /** The body differs from the event's payload (a transform ran): it must be kept for replays. */
  transformed: boolean;
  /** The Automation version whose run produced the body. */
  automation?: { id: string; version: number };
  /** Settles once that run's record is written (written while the body is sent). */
  automationRecorded?: Promise<void>;
}

export type Built =
  | { kind: 'dispatch'; dispatch: Dispatch }
  | { kind: 'drop'; reason: string; durationMs: number; automation: { id: string; version: number } }
  | { kind: 'failed'; error: string; terminal: boolean; durationMs: number; automation: { id: string; version: number } }
  | { kind: 'wait'; runAt: Date };

/**
 * The dispatch snapshot is written once, by the first attempt: its headers always, its body
 * only when a transform produced it (otherwise the retained event payload is those bytes).
 */
export function snapshotToStore(claim: ClaimedDelivery, d: Dispatch): AttemptResult['dispatch'] {
  if (claim.hasDispatch || claim.dispatchHeaders) return null;
  return { body: d.transformed ? d.body : null, contentType: d.contentType, headers: d.headers };
}

/**
 * The bytes and headers to send: the stored dispatch snapshot (retries, replays: no transform
 * runs again), else the event payload, transformed when a transform is set. An Automation may
 * instead drop the event, fail, or have to wait for a concurrency slot.
 */
export async function buildDispatch(engine: DeliveryEngine, claim: ClaimedDelivery): Promise<Built> {
  if (claim.body === null) throw new Error('the retained payload is gone');
  if (claim.hasDispatch || claim.dispatchHeaders) {
    return {
      kind: 'dispatch',
      dispatch: {
        body: claim.body,
        contentType: claim.contentType,
        headers: claim.dispatchHeaders ?? (claim.contentType ? { 'content-type': claim.contentType } : {}),
        transformed: claim.hasDispatch,
      },
    };
  }
  let body = claim.body;
  let contentType = claim.contentType;
  let transformed = false;
  let automation: { id: string; version: number } | undefined;
  let automationRecorded: Promise<void> | undefined;
  const transform = storedTransform(claim.webhook.transform);
  if (transform?.kind === 'jsonata') {
    ({ body, contentType } = await transformPayload(transform, body));
    transformed = true;
  } else if (transform?.kind === 'automation') {
    automation = { id: transform.automationId, version: transform.version };
    const started = performance.now();
    let out: AutomationOutcome;
    try {
      out = await runAutomation(engine.rt, {
      projectId: claim.row.project_id,
      automationId: automation.id,
      version: automation.version,
      deliveryId: claim.row.id,
      mode: 'delivery',
      webhookId: claim.row.webhook_id,
      rawBody: body,
      event: {
        id: claim.row.event_id,
        receivedAt: new Date(claim.event.receivedAt).toISOString(),
        channel: claim.event.channel,
        method: claim.event.method,
        path: claim.event.path,
        query: claim.event.query,
        headers: claim.eventHeaders,
        contentType: claim.contentType,
        body: bodyForMatching(body),
      },
    });
    } catch (err) {
      // The run could not be made (the database, a lease, the engine): not an error of the code,
      // so the webhook's retry policy decides, and the attempt names the pinned version.
      log.warn({ err, deliveryId: claim.row.id }, 'an automation run could not be made; the attempt is retried by the retry policy');
      return { kind: 'failed', error: `automation could not run: ${(err as Error)?.message ?? String(err)}`, terminal: false, durationMs: Math.round(performance.now() - started), automation };
    }
    const durationMs = Math.round(performance.now() - started);
    if (out.kind === 'wait') return out;
    if (out.kind === 'drop') return { kind: 'drop', reason: out.reason, durationMs, automation };
    if (out.kind === 'failed') return { kind: 'failed', error: out.error, terminal: out.terminal, durationMs, automation };
    ({ body, contentType, recorded: automationRecorded } = out);
    transformed = true;
  }
  const destHeaders = (claim.row.destination?.config?.headers ?? {}) as Record<string, string>;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...claim.webhook.customHeaders, ...destHeaders })) headers[k.toLowerCase()] = String(v);
  if (contentType) headers['content-type'] = contentType;
  return { kind: 'dispatch', dispatch: { body, contentType, headers, transformed, automation, automationRecorded } };
}
