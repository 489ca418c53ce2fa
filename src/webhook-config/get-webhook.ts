import { NotFound } from '../errors.ts';
import type { Webhook } from '../generated/prisma/client.ts';
import type { Runtime } from '../runtime.ts';

type Rt = Pick<Runtime, 'db'>;

/** A webhook of the project; 404 for unknown ids and for other projects' webhooks alike. */
export async function getWebhook(rt: Rt, projectId: string, webhookId: string): Promise<Webhook> {
  const webhook = await rt.db.prisma.webhook.findFirst({ where: { id: webhookId, projectId } });
  if (!webhook) throw new NotFound('webhook', webhookId);
  return webhook;
}
