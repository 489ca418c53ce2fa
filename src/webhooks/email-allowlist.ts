import { AlreadyExists, NotFound } from '../errors.ts';
import { newId } from '../ids.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { normalizeSenderPattern } from '../webhook-config/email-senders.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

/** An entry as the API shows it. */
export interface EmailAllowlistEntryView {
  id: string;
  pattern: string;
  createdAt: Date;
}

const view = (e: { id: string; pattern: string; createdAt: Date }): EmailAllowlistEntryView => ({ id: e.id, pattern: e.pattern, createdAt: e.createdAt });

/** A webhook's sender allowlist, oldest first (cursor list; every tier). */
export async function listEmailAllowlist(rt: Rt, projectId: string, webhookId: string, page: PageRequest) {
  await getWebhook(rt, projectId, webhookId);
  const result = await paginate(page, {
    scope: `email-allowlist:${webhookId}`,
    filters: {},
    order: 'asc',
    fetch: (range, order, take) => rt.db.prisma.emailAllowlistEntry.findMany({ where: { webhookId, id: range }, orderBy: { id: order }, take }),
  });
  return { ...result, items: result.items.map(view) };
}

/** Adds a pattern (Starter and above): 400 for a malformed one, 409 already_exists for one listed (as stored, lower-cased). */
export async function addEmailAllowlistEntry(rt: Rt, projectId: string, webhookId: string, rawPattern: unknown): Promise<EmailAllowlistEntryView> {
  await getWebhook(rt, projectId, webhookId);
  requireFeature((await getProject(rt, projectId)).tier, 'email_allowlists');
  const pattern = normalizeSenderPattern(rawPattern);
  try {
    const entry = await rt.db.prisma.emailAllowlistEntry.create({ data: { id: newId('eal'), projectId, webhookId, pattern } });
    ingestTargetsChanged(rt, { webhookId });
    return view(entry);
  } catch (e) {
    if ((e as { code?: unknown }).code === 'P2002') throw new AlreadyExists(`The pattern ${pattern} is already in this webhook's email allowlist.`);
    throw e;
  }
}

/** Removes an entry (Starter and above); 404 for an unknown one. */
export async function deleteEmailAllowlistEntry(rt: Rt, projectId: string, webhookId: string, entryId: string) {
  await getWebhook(rt, projectId, webhookId);
  requireFeature((await getProject(rt, projectId)).tier, 'email_allowlists');
  const { count } = await rt.db.prisma.emailAllowlistEntry.deleteMany({ where: { id: entryId, webhookId } });
  if (count === 0) throw new NotFound('email allowlist entry', entryId);
  ingestTargetsChanged(rt, { webhookId });
  return { id: entryId, deleted: true };
}
