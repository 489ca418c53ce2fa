import type { Prisma } from '../generated/prisma/client.ts';

/** What every contact is loaded with: its one conversation's id (answered as `conversation_id`). */
export const CONTACT_INCLUDE = { conversation: { select: { id: true } } } as const satisfies Prisma.ContactInclude;
export type ContactRow = Prisma.ContactGetPayload<{ include: typeof CONTACT_INCLUDE }>;

/** What every message is loaded with: the conversation's contact, embedded in answers. */
export const MESSAGE_INCLUDE = { contact: true } as const satisfies Prisma.MessageInclude;
export type MessageRow = Prisma.MessageGetPayload<{ include: typeof MESSAGE_INCLUDE }>;

/** GraphQL may ask for more relations than the defaults; they are merged into them. */
export type ContactQuery = { include?: Prisma.ContactInclude };
export type MessageQuery = { include?: Prisma.MessageInclude };
