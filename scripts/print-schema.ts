// Prints the GraphQL schema built by Pothos to schema.graphql (a test fails when it is stale).
import { writeFileSync } from 'node:fs';
import { printSchema } from 'graphql';
import { schema } from '../src/schema/index.ts';

writeFileSync('schema.graphql', printSchema(schema) + '\n');
console.log('wrote schema.graphql');
