/**
 * The REST surface: every `/v1` route, the GraphQL field SOFA maps it to, its method
 * and its success status. One table; nothing else defines REST routes.
 */
export interface RestRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Relative to /v1, with `:name` path parameters matching field arguments. */
  path: string;
  /** `Query.name` or `Mutation.name`. */
  field: string;
  status?: 200 | 201 | 202;
}

export const REST_ROUTES: RestRoute[] = [
  // projects
  { method: 'GET', path: '/project', field: 'Query.project' },
];
