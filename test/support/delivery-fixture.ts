import { randomBytes } from 'node:crypto';
import { inTransaction } from '../../src/db/client.ts';
import { insertDelivery } from '../../src/deliveries/enqueue.ts';
import { newId } from '../../src/ids.ts';
import type { Runtime } from '../../src/runtime.ts';
import { encryptSecret } from '../../src/encryption.ts';

export function newWebhookSecret() {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export interface FixtureWebhook {
  id: string;
  projectId: string;
  signingSecret: string;
  destination: { id: string; name: string; type: string; config: { url: string } };
}

/** A webhook with a signing secret and a default HTTP destination, written through the schema. */
export async function createFixtureWebhook(
  rt: Pick<Runtime, 'db'>,
  projectId: string,
  url: string,
  controls: Partial<{ deliveryMode: string; maxInFlight: number; timeoutMs: number; retryPolicy: unknown; throttleRatePerSecond: number | null; customHeaders: Record<string, string>; transform: unknown; status: string }> = {},
): Promise<FixtureWebhook> {
  const id = newId('wh');
  const signingSecret = newWebhookSecret();
  const destination = { id: newId('dst'), name: 'default', type: 'webhook', config: { url } };
  await rt.db.prisma.webhook.create({
    data: {
      id,
      projectId,
      publicId: newId('hook'),
      name: 'fixture',
      status: controls.status ?? 'active',
      deliveryMode: controls.deliveryMode ?? 'parallel',
      maxInFlight: controls.maxInFlight ?? 10,
      timeoutMs: controls.timeoutMs ?? 5000,
      retryPolicy: (controls.retryPolicy ?? {}) as any,
      throttleRatePerSecond: controls.throttleRatePerSecond ?? null,
      customHeaders: (controls.customHeaders ?? {}) as any,
      transform: (controls.transform ?? undefined) as any,
      secrets: {
        create: [
          { id: newId('whs'), projectId, kind: 'signing', version: 1, secretEnc: encryptSecret(signingSecret) },
          { id: newId('whs'), projectId, kind: 'ingest', version: 1, secretEnc: encryptSecret(newWebhookSecret()) },
        ],
      },
      destinations: { create: [{ id: destination.id, projectId, name: 'default', type: 'webhook', config: destination.config, isDefault: true }] },
    },
  });
  return { id, projectId, signingSecret, destination };
}

/** An event and its delivery, queued in one transaction (as ingest does). */
export async function enqueueFixtureEvent(
  rt: Pick<Runtime, 'db'>,
  wh: FixtureWebhook,
  body: string | Buffer = JSON.stringify({ hello: 'world' }),
  opts: { contentType?: string; runAt?: Date } = {},
) {
  const eventId = newId('evt');
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return inTransaction(rt.db.pool, async (client) => {
    await client.query(
      `INSERT INTO events (id, project_id, webhook_id, channel, method, path, headers, content_type, body, body_size)
       VALUES ($1, $2, $3, 'http', 'POST', '/', '{}', $4, $5, $6)`,
      [eventId, wh.projectId, wh.id, opts.contentType ?? 'application/json', bytes, bytes.length],
    );
    const d = await insertDelivery(client, {
      projectId: wh.projectId,
      webhookId: wh.id,
      eventId,
      destinationId: wh.destination.id,
      destination: wh.destination,
      runAt: opts.runAt ?? null,
    });
    return { eventId, deliveryId: d.id, status: d.status };
  });
}
