import type { ObjectRef } from '@pothos/core';
import type { DefaultConnectionArguments } from '@pothos/plugin-relay';
import { InvalidRequest } from '../errors.ts';
import { builder, type BuilderTypes } from '../graphql/builder.ts';
import type { Page, PageRequest } from './cursor.ts';

/**
 * `{items, nextCursor}`: the REST list shape of the event part, as a GraphQL type so
 * SOFA can return it unchanged. One per item type, e.g. pageOf('DeliveryPage', DeliveryRef).
 */
export function pageOf<T>(name: string, itemRef: ObjectRef<BuilderTypes, T>) {
  return builder.objectRef<{ items: T[]; nextCursor: string | null }>(name).implement({
    description: 'One page of a cursor list.',
    fields: (t) => ({
      items: t.field({ type: [itemRef], description: 'At most `limit` items.', resolve: (p) => p.items }),
      nextCursor: t.string({
        nullable: true,
        description: 'Pass it as `cursor` (with the same filters) for the next page; null on the last page.',
        resolve: (p) => p.nextCursor,
      }),
    }),
  });
}

/** The cursor-list arguments every REST list field takes. */
export const pageArgs = builder.args((t) => ({
  limit: t.int({ required: false, description: 'Page size, 1..100 (default 20); values outside are clamped.' }),
  cursor: t.string({ required: false, description: 'nextCursor of the previous page, with the same filters.' }),
}));

/**
 * A Relay connection's arguments as a page request of the service function behind the REST
 * page: `first`/`last` are its `limit` (clamped the same way), `after`/`before` its cursors.
 */
export function pageRequestOf(args: DefaultConnectionArguments): PageRequest {
  if (args.first != null && args.last != null) throw new InvalidRequest('Give first or last, not both.', 'last');
  const fromEnd = args.last != null;
  return { limit: fromEnd ? args.last : args.first, cursor: args.after, before: args.before, fromEnd };
}

/** A page as a Relay connection; its edges' cursors are the REST page's (one codec). */
export function connectionOf<T>(page: Page<T>) {
  const edges = page.items.map((node, index) => ({ node, cursor: page.cursorAt(index) }));
  return {
    edges,
    pageInfo: {
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
      hasPreviousPage: page.hasPreviousPage,
      hasNextPage: page.hasNextPage,
    },
  };
}
