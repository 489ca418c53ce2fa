// Webhooks, ingests and deliveries made directly on the database, for quota tests that must not
// depend on the webhook and ingest routes (built separately): the same transaction shape as the
// ingest path (quota checks with the event, then the delivery, in one transaction).
import { insertDelivery } from '../../src/deliveries/enqueue.ts';
import { inTransaction } from '../../src/db/client.ts';
import { newId } from '../../src/ids.ts';
import { storeEvent } from '../../src/ingest/store-event.ts';
import type { Runtime } from '../../src/runtime.ts';

export async function createWebhookRow(rt: Runtime, projectId: string, quotaOverrides: Record<string, number> = {}) {
  return rt.db.prisma.webhook.create({
    data: {
      id: newId('wh'),
      projectId,
      publicId: newId('pub'),
      name: 'quota test',
      retryPolicy: {},
      quotaOverrides,
    },
  });
}

/** The ingest transaction: the event within the quota checks, then its delivery. Throws what the checks throw. */
export async function simulateIngest(rt: Runtime, projectId: string, webhookId: string, body: Buffer = Buffer.from('{"ok":true}')) {
  const project = await rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
  const webhook = await rt.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } });
  return inTransaction(rt.db.pool, async (client) => {
    const eventId = newId('evt');
    await storeEvent(
      rt,
      client,
      { id: eventId, projectId, webhookId, channel: 'http', method: 'POST', path: null, query: {}, headers: {}, contentType: 'application/json', body, payloadExpiresAt: null, configVersion: null },
      { project, webhook },
    );
    const delivery = await insertDelivery(client, { projectId, webhookId, eventId, destinationId: null, destination: { type: 'webhook', url: 'http://127.0.0.1:9/' } });
    return { eventId, deliveryId: delivery.id };
  });
}

/** Catches the error a promise rejects with (or fails when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<any> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

/**
 * Runs `fn` inside one fixed one-second rate window: waits for the start of a second and retries
 * (bounded) when `fn` did not finish within the second it started in.
 */
export async function withinOneSecond<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 0; ; i++) {
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
    const start = Math.floor(Date.now() / 1000);
    const result = await fn();
    if (Math.floor(Date.now() / 1000) === start) return result;
    if (i + 1 >= attempts) throw new Error('could not run within one rate window');
    await new Promise((r) => setTimeout(r, 1100)); // let the window this attempt used pass
  }
}
