// Typed GraphQL documents (gql.tada): `graphql(\`query …\`)` is checked against schema.graphql
// through its introspection (graphql-env.d.ts, written by `npm run schema:print`), and `gql` /
// `subscribe` in api.ts return the document's result type and take its variables. A renamed or
// removed field, or a wrong variable, fails `npm run dashboard:typecheck`.
//
// gql.tada is used for its types only: at run time a document is its text (the server parses
// it), so no GraphQL parser ships in the dashboard's JavaScript: `graphql(text, [fragments])`
// appends the fragments' text (each once) and drops gql.tada's `@_unmask` (which only tells the
// types to spread a fragment's fields in place). `documentText` is the one place that reads it back.
import type { initGraphQLTada, TadaDocumentNode } from 'gql.tada';
import type { introspection } from './graphql-env.d.ts';

/**
 * A value of the JSON scalar: opaque, so that `unknown` in a result type can only be a field
 * that schema.graphql does not have (see `KnownFields`). Read it with `json(value)`.
 */
export interface Json {
  readonly __json: unique symbol;
}

/** Any value the API takes as JSON (an argument of the JSON scalar). */
export function toJson(value: unknown): Json {
  return value as Json;
}

/** A JSON scalar's value as what it is (the API's JSON; the caller knows its shape). */
export function json<T = unknown>(value: Json | null | undefined): T {
  return value as unknown as T;
}

/** Whether a result type has a field gql.tada could not type (a field that is not in the schema). */
type HasUnknown<T> = unknown extends T
  ? true
  : T extends Json | string | number | boolean | null | undefined
    ? false
    : T extends readonly (infer E)[]
      ? HasUnknown<E>
      : true extends { [K in keyof T]-?: HasUnknown<T[K]> }[keyof T]
        ? true
        : false;

/**
 * gql.tada types a field that schema.graphql does not have as `unknown` without an error; `gql`
 * and `subscribe` take only documents whose every field is known, so a renamed or removed
 * field fails `npm run dashboard:typecheck` here.
 */
export type KnownFields<T> = HasUnknown<T> extends true ? { 'a field of this document is not in schema.graphql': never } : unknown;

/** Every custom scalar of schema.graphql must be listed here: one left out is typed `unknown`, which `KnownFields` refuses. */
type Graphql = initGraphQLTada<{
  introspection: introspection;
  scalars: {
    DateTime: string;
    JSON: Json;
    SafeInt: number;
    UnixTime: number;
  };
}>;

function graphqlText(source: string, fragments: readonly unknown[] = []): string {
  const parts = new Set([source.replace(/\s@_unmask\b/g, '')]);
  for (const f of fragments) for (const part of String(f).split(FRAGMENT_SEPARATOR)) parts.add(part);
  return [...parts].join(FRAGMENT_SEPARATOR);
}
const FRAGMENT_SEPARATOR = '\n\n';

export const graphql = graphqlText as unknown as Graphql;

/** A typed document's GraphQL text, as sent to /graphql. */
export function documentText(document: TadaDocumentNode<unknown, never>): string {
  return document as unknown as string;
}

export type { ResultOf, TadaDocumentNode, VariablesOf } from 'gql.tada';
