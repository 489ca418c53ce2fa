import { DomainError } from '../errors.ts';
import type { PgPubSub } from '../db/pubsub.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { readMessage } from './message-reads.ts';
import type { MessageRow } from './rows.ts';

/**
 * Live message events across processes. Topics carry the project id, so a subscriber only ever
 * hears its own project. The fully loaded message (with its contact) travels in the NOTIFY
 * payload, so a thousand subscribers cost no database reads; a message too large for NOTIFY
 * travels as its id and is loaded once per receiving process.
 */
export type MessageEvent = 'created' | 'updated';

const PREFIX = 'messages:';

function topic(event: MessageEvent, projectId: string) {
  return `${PREFIX}${event}:${projectId}`;
}

export async function publishMessage(rt: Pick<Runtime, 'pubsub'>, event: MessageEvent, row: MessageRow): Promise<void> {
  try {
    await rt.pubsub.publish(topic(event, row.projectId), row, row.id);
  } catch (err) {
    // The write has committed; a lost live event must not turn it into an error.
    log.warn({ err, messageId: row.id, event }, 'publishing a message event failed');
  }
}

const withRefLoader = new WeakSet<PgPubSub>();

function ensureRefLoader(rt: Pick<Runtime, 'db' | 'pubsub'>) {
  if (withRefLoader.has(rt.pubsub)) return;
  withRefLoader.add(rt.pubsub);
  rt.pubsub.onRef(PREFIX, async (t, ref) => {
    const projectId = t.slice(t.lastIndexOf(':') + 1);
    return readMessage(rt, projectId, ref);
  });
}

type Wire<T> = { [K in keyof T]: T[K] extends Date ? Date | string : T[K] extends Date | null ? Date | string | null : T[K] };

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));
const maybeDate = (v: Date | string | null) => (v === null ? null : date(v));

/** A message as it arrives over NOTIFY (JSON: dates are strings) back to a row. */
function revive(p: Wire<Omit<MessageRow, 'contact'>> & { contact: Wire<MessageRow['contact']> }): MessageRow {
  return {
    ...p,
    createdAt: date(p.createdAt),
    updatedAt: maybeDate(p.updatedAt),
    readAt: maybeDate(p.readAt),
    contact: { ...p.contact, createdAt: date(p.contact.createdAt), lastActiveAt: maybeDate(p.contact.lastActiveAt) },
  };
}

/** Events of one project, optionally of one of its conversations (which must exist). */
export async function subscribeMessages(
  rt: Pick<Runtime, 'db' | 'pubsub'>,
  projectId: string,
  event: MessageEvent,
  conversationId?: string | null,
): Promise<AsyncIterable<MessageRow>> {
  ensureRefLoader(rt);
  if (conversationId) {
    const exists = await rt.db.prisma.conversation.count({ where: { id: conversationId, projectId } });
    if (!exists) throw new DomainError(404, 'not_found', `No conversation with id ${conversationId}.`, { param: 'conversationId' });
  }
  // null: a large message deleted before its id could be loaded
  return rt.pubsub.subscribe<MessageRow>(topic(event, projectId), (payload) => {
    const p = payload as Parameters<typeof revive>[0] | null;
    return p !== null && (!conversationId || p.conversationId === conversationId) ? reviveOnce(p) : undefined;
  });
}

// Every subscriber on this process receives the same notification object: revive it once, so
// they also share one object (and the GraphQL result computed from it, see http/graphql.ts).
const revived = new WeakMap<object, MessageRow>();
function reviveOnce(p: Parameters<typeof revive>[0]): MessageRow {
  let row = revived.get(p);
  if (!row) revived.set(p, (row = revive(p)));
  return row;
}
