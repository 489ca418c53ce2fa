import SchemaBuilder from '@pothos/core';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import { DateTimeResolver, JSONResolver, SafeIntResolver } from 'graphql-scalars';
import type PrismaTypes from '../generated/pothos-types.ts';
import { getDatamodel } from '../generated/pothos-types.ts';
import type { Auth } from '../auth.ts';
import type { Runtime } from '../runtime.ts';
import { UnixTimeResolver } from './unix-time.ts';

export interface GraphQLContext {
  rt: Runtime;
  /** Set by the HTTP layer after the API key was checked; every resolver scopes by it. */
  auth: Auth;
}

export const builder = new SchemaBuilder<{
  PrismaTypes: PrismaTypes;
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  Scalars: {
    JSON: { Input: unknown; Output: unknown };
    DateTime: { Input: Date; Output: Date | string };
    UnixTime: { Input: Date; Output: Date | string };
    /** Integers beyond 32 bits (byte counts, quotas), up to 2^53 - 1. */
    SafeInt: { Input: number; Output: number };
  };
}>({
  plugins: [PrismaPlugin, RelayPlugin],
  defaultFieldNullability: false,
  prisma: {
    client: (ctx) => ctx.rt.db.prisma,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
  },
});

/** The builder's schema types, for helpers typed from the builder (field builders, object refs). */
export type BuilderTypes = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer Types> ? Types : never;

builder.addScalarType('JSON', JSONResolver);
builder.addScalarType('DateTime', DateTimeResolver);
builder.addScalarType('UnixTime', UnixTimeResolver);
builder.addScalarType('SafeInt', SafeIntResolver);
builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
