import { InvalidState } from '../errors.ts';
import type { Webhook } from '../generated/prisma/client.ts';
import { inTransaction } from '../db/client.ts';
import type { Runtime } from '../runtime.ts';
import { removeWebhookAttemptJobs, requeueWebhookAttemptJobs } from '../deliveries/job.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

export type WebhookStatus = 'active' | 'paused' | 'archived';
export type LifecycleAction = 'pause' | 'resume' | 'archive' | 'restore';

/** The contract's state machine: the states each action accepts and the state it leads to. */
export const TRANSITIONS: Record<LifecycleAction, { from: WebhookStatus[]; to: WebhookStatus }> = {
  pause: { from: ['active'], to: 'paused' },
  resume: { from: ['paused'], to: 'active' },
  archive: { from: ['active', 'paused'], to: 'archived' },
  restore: { from: ['archived'], to: 'paused' },
};

/**
 * Moves a webhook along the state machine in one conditional UPDATE, so concurrent
 * actions cannot both succeed from the same state; anything else is 409 invalid_state.
 */
export async function transitionWebhook(rt: Rt, projectId: string, webhookId: string, action: LifecycleAction): Promise<Webhook> {
  const { from, to } = TRANSITIONS[action];
  const result = await rt.db.prisma.webhook.updateMany({ where: { id: webhookId, projectId, status: { in: from } }, data: { status: to } });
  if (result.count > 0) ingestTargetsChanged(rt, { webhookId });
  const webhook = await getWebhook(rt, projectId, webhookId);
  if (result.count === 0) throw new InvalidState(`Cannot ${action} a webhook that is ${webhook.status} (allowed from ${from.join(' or ')}).`);
  // Deliveries that waited while the webhook was paused or archived run now.
  if (to === 'active') await requeueWebhookAttemptJobs(rt.db.pool, webhookId);
  return webhook;
}

export const pauseWebhook = (rt: Rt, projectId: string, id: string) => transitionWebhook(rt, projectId, id, 'pause');
export const resumeWebhook = (rt: Rt, projectId: string, id: string) => transitionWebhook(rt, projectId, id, 'resume');
export const archiveWebhook = (rt: Rt, projectId: string, id: string) => transitionWebhook(rt, projectId, id, 'archive');
export const restoreWebhook = (rt: Rt, projectId: string, id: string) => transitionWebhook(rt, projectId, id, 'restore');

/**
 * Removes an archived webhook and everything under it: secrets, destinations, events,
 * deliveries and their attempts (by cascade), DLQ entries, and the queued jobs of its
 * deliveries. Cannot be undone.
 */
export async function destroyWebhook(rt: Rt, projectId: string, webhookId: string) {
  const webhook = await getWebhook(rt, projectId, webhookId);
  if (webhook.status !== 'archived') throw new InvalidState(`Only an archived webhook can be destroyed; this one is ${webhook.status}.`);
  await inTransaction(rt.db.pool, async (client) => {
    await removeWebhookAttemptJobs(client, webhookId);
    const gone = await client.query(`DELETE FROM webhooks WHERE id = $1 AND project_id = $2 AND status = 'archived'`, [webhookId, projectId]);
    if (gone.rowCount === 0) throw new InvalidState('The webhook changed state while being destroyed; it is no longer archived.');
    await client.query('DELETE FROM dlq_entries WHERE webhook_id = $1', [webhookId]);
  });
  ingestTargetsChanged(rt, { webhookId });
  return { id: webhookId, deleted: true };
}
