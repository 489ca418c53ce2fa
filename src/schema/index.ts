import { GraphQLSchema, lexicographicSortSchema, type GraphQLObjectType } from 'graphql';
import { withAuditedMutations } from './audited-mutations.ts';
import { builder } from '../graphql/builder.ts';
import '../projects/graphql.ts';
import '../deliveries/graphql.ts';
import '../conversations/graphql.ts';
import '../destinations/graphql.ts';
import '../destinations/listen/graphql.ts';
import '../routing/graphql.ts';
import '../schedules/graphql.ts';
import '../webhooks/graphql.ts';
import '../providers/graphql.ts';
import '../files/graphql.ts';
import '../automations/graphql.ts';
import '../metrics/graphql.ts';
import '../drains/graphql.ts';
import '../alerts/graphql.ts';

const built = builder.toSchema().toConfig();
// Root types are declared once in the builder; a root type no domain has filled yet is left out.
const nonEmpty = (t: GraphQLObjectType | null | undefined) => (t && Object.keys(t.getFields()).length > 0 ? t : undefined);

export const schema = withAuditedMutations(lexicographicSortSchema(
  new GraphQLSchema({
    ...built,
    mutation: nonEmpty(built.mutation),
    subscription: nonEmpty(built.subscription),
    types: built.types.filter((t) => !([built.mutation, built.subscription] as unknown[]).includes(t) || nonEmpty(t as GraphQLObjectType)),
  }),
));
