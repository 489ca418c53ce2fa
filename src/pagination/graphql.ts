import { builder } from '../graphql/builder.ts';

/**
 * `{items, nextCursor}`: the REST list shape of the event part, as a GraphQL type so
 * SOFA can return it unchanged. One per item type, e.g. pageOf('DeliveryPage', DeliveryRef).
 */
// any: an object ref of any Pothos kind (prismaObject, objectRef) whose shape is T; Pothos exports no common type for them.
export function pageOf<T>(name: string, itemRef: any) {
  return builder.objectRef<{ items: T[]; nextCursor: string | null }>(name).implement({
    description: 'One page of a cursor list.',
    fields: (t) => ({
      items: t.field({ type: [itemRef], description: 'At most `limit` items.', resolve: (p) => p.items as any }),
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
