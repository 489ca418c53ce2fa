import { builder } from '../graphql/builder.ts';

/**
 * `{items, nextCursor}`: the REST list shape of the event part, as a GraphQL type so
 * SOFA can return it unchanged. One per item type, e.g. pageOf('DeliveryPage', DeliveryRef).
 */
export function pageOf<T>(name: string, itemRef: any) {
  return builder.objectRef<{ items: T[]; nextCursor: string | null }>(name).implement({
    fields: (t) => ({
      items: t.field({ type: [itemRef], resolve: (p) => p.items as any }),
      nextCursor: t.string({ nullable: true, resolve: (p) => p.nextCursor }),
    }),
  });
}

/** The cursor-list arguments every REST list field takes. */
export const pageArgs = builder.args((t) => ({
  limit: t.int({ required: false }),
  cursor: t.string({ required: false }),
}));
