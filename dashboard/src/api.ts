// The one way the dashboard talks to the service: GraphQL over fetch (queries, mutations) and
// graphql-ws (subscriptions), authenticated by the session cookie plus its CSRF token.
import type { Client } from 'graphql-ws';
import { documentText, type KnownFields, type TadaDocumentNode } from './graphql.ts';

function meta(name: string): string {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? '';
}

export const session = {
  csrfToken: meta('csrf-token'),
  email: meta('user-email'),
  publicUrl: meta('public-url') || location.origin,
};

/** An error as the API words it (CONTRACT §4): its code and its message for a person. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; extensions?: { code?: string } & Record<string, unknown> }[];
}

/** The variables argument: optional when the document has no required variable. */
type VariablesArg<V> = {} extends V ? [variables?: V] : [variables: V];

/**
 * Runs one query or mutation (a `graphql(...)` document, typed from schema.graphql); throws
 * ApiError with the contract's code and message.
 */
export async function gql<T, V>(document: TadaDocumentNode<T, V> & KnownFields<T>, ...[variables]: VariablesArg<V>): Promise<T> {
  const query = documentText(document);
  let res: Response;
  try {
    res = await fetch('/graphql', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
      body: JSON.stringify({ query, variables: variables ?? {} }),
    });
  } catch {
    throw new ApiError('The service cannot be reached. Check your connection and try again.', 'network');
  }
  let body: GraphQLResponse<T>;
  try {
    body = await res.json();
  } catch {
    throw new ApiError(`The service answered ${res.status} without a readable body.`, 'internal');
  }
  if (body.errors?.length) {
    const e = body.errors[0];
    if (e.extensions?.code === 'unauthorized') {
      // The session ended (12 h idle, or signed out elsewhere): back to the sign-in page.
      location.assign('/dashboard/login');
    }
    throw new ApiError(e.message, e.extensions?.code ?? 'error', e.extensions ?? {});
  }
  return body.data as T;
}

let client: Promise<Client> | undefined;

/** One graphql-ws connection per tab, opened on first use (its code is loaded then too). */
function wsClient(): Promise<Client> {
  client ??= import('graphql-ws').then(({ createClient }) =>
    createClient({
      url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`,
      connectionParams: { csrfToken: session.csrfToken },
      retryAttempts: Infinity,
      shouldRetry: () => true,
      lazy: true,
    }),
  );
  return client;
}

/** Subscribes; returns the function that ends it. */
export function subscribe<T, V>(document: TadaDocumentNode<T, V> & KnownFields<T>, variables: V, onData: (data: T) => void, onError?: (e: ApiError) => void): () => void {
  const query = documentText(document);
  let dispose: (() => void) | undefined;
  let ended = false;
  void wsClient().then((c) => {
    if (ended) return;
    dispose = c.subscribe<T>(
      { query, variables: variables as Record<string, unknown> },
      {
        next: (r) => {
          if (r.errors?.length) onError?.(new ApiError(r.errors[0].message, String(r.errors[0].extensions?.code ?? 'error')));
          else if (r.data) onData(r.data as T);
        },
        error: () => onError?.(new ApiError('Live updates were interrupted; reconnecting.', 'network')),
        complete: () => {},
      },
    );
  });
  return () => {
    ended = true;
    dispose?.();
  };
}
