import { z } from 'zod';
import type { Runtime } from '../runtime.ts';
import { bodyForMatching, matchRule, type EventContext, type RoutingRule } from '../routing/rules.ts';
import { parseInput } from '../validation.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { storedTransform, transformPayload } from '../webhook-config/transform.ts';
import { runAutomation } from '../automations/run.ts';
import { providerEventType, type ProviderPack } from '../providers/index.ts';
import { CHANNEL_NAMES } from '../ingest/channels.ts';

type Rt = Pick<Runtime, 'db' | 'config'>;

export interface ProbeInput {
  channel?: string | null;
  method?: string | null;
  path?: string | null;
  query?: unknown;
  headers?: unknown;
  contentType?: string | null;
  body?: unknown;
}

const probeSchema = z.object({
  channel: z.enum(CHANNEL_NAMES).nullish(),
  method: z.string().max(16).nullish(),
  path: z.string().max(2048).nullish(),
  query: z.record(z.unknown()).nullish(),
  headers: z.record(z.unknown()).nullish(),
  contentType: z.string().max(256).nullish(),
  body: z.unknown(),
});

/** The probe as the routing context of an ingested event (header names lower-cased, string bodies parsed where they parse). */
export function probeContext(input: ProbeInput): EventContext {
  const p = parseInput(probeSchema, input, '');
  const headers = Object.fromEntries(Object.entries(p.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const contentType = p.contentType ?? (typeof headers['content-type'] === 'string' ? headers['content-type'] : null);
  return {
    channel: p.channel ?? 'http',
    method: (p.method ?? 'POST').toUpperCase(),
    path: p.path ?? '/',
    query: p.query ?? {},
    headers,
    contentType,
    body: typeof p.body === 'string' ? bodyForMatching(p.body) : (p.body ?? null),
  };
}

/**
 * Evaluates routing and the saved transform against a probe, as ingest and delivery
 * would, without storing anything.
 */
export async function testDelivery(rt: Rt, projectId: string, webhookId: string, input: ProbeInput) {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const probe = probeContext(input);
  // As ingest sees it: the webhook's provider pack names the provider and where the event type is.
  const pack = webhook.providerPack as ProviderPack | null;
  const context: EventContext = { ...probe, provider: pack?.provider ?? null, eventType: pack ? providerEventType(pack, probe.headers, () => probe.body) : null };
  const rules = (webhook.routing as unknown as RoutingRule[]) ?? [];
  const matchedRule = matchRule(rules, context);
  const destination = await rt.db.prisma.destination.findFirstOrThrow({
    where: matchedRule ? { id: matchedRule.destinationId, webhookId } : { webhookId, isDefault: true },
  });
  let payload: unknown = context.body;
  let transformError: string | null = null;
  let dropped = false;
  let automationRunId: string | null = null;
  const transformed = webhook.transform !== null;
  const transform = storedTransform(webhook.transform);
  if (transform?.kind === 'automation') {
    // Runs the pinned version for real (subrequests included); refusals (disabled, quotas, concurrency) are errors.
    const out = await runAutomation(rt, {
      projectId,
      automationId: transform.automationId,
      version: transform.version,
      deliveryId: null,
      mode: 'test',
      event: { id: 'evt_test', receivedAt: new Date().toISOString(), ...context },
    });
    if (out.kind === 'payload') payload = out.value;
    else payload = null;
    if (out.kind === 'drop') dropped = true;
    if (out.kind === 'failed') transformError = out.error;
    if (out.kind !== 'wait') automationRunId = out.runId;
  } else if (transformed) {
    // The bytes ingest would have stored: a string body as sent, anything else as JSON.
    const raw = typeof input.body === 'string' ? input.body : JSON.stringify(input.body ?? null);
    try {
      payload = (await transformPayload(webhook.transform, Buffer.from(raw))).value;
    } catch (e) {
      payload = null;
      transformError = (e as Error).message;
    }
  }
  return { destination, matchedRule, transformed, payload, transformError, dropped, automationRunId };
}
