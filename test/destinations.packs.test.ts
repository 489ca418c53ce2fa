// Destination types are packs (src/destinations/packs/): one list, from which the API's type names,
// the tier gate, the GraphQL enum (and through it the OpenAPI document) and the senders are read.
import type { GraphQLEnumType, GraphQLObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { DESTINATION_PACKS, DESTINATION_TYPES } from '../src/destinations/packs/index.ts';
import { requireDestinationType } from '../src/destinations/service.ts';
import { schema } from '../src/schema/index.ts';

describe('destination packs', () => {
  it('name the contract’s destination types, in one list', () => {
    expect(DESTINATION_TYPES).toEqual(['webhook', 'aws_sqs', 'aws_eventbridge', 'gcp_pubsub', 'object_storage', 'cli']);
  });

  it('are the values of the GraphQL enum DestinationType, which Destination.type answers in', () => {
    const type = schema.getType('DestinationType') as GraphQLEnumType;
    expect(type.getValues().map((v) => v.name).sort()).toEqual([...DESTINATION_TYPES].sort());
    expect(String((schema.getType('Destination') as GraphQLObjectType).getFields().type.type)).toBe('DestinationType!');
  });

  it('gate every type but webhook and cli behind the typed_destinations tier', () => {
    for (const pack of DESTINATION_PACKS) {
      const gated = (() => {
        try {
          requireDestinationType('free', pack.type);
          return false;
        } catch {
          return true;
        }
      })();
      expect([pack.type, gated]).toEqual([pack.type, pack.type !== 'webhook' && pack.type !== 'cli']);
    }
  });
});
