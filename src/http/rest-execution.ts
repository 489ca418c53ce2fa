import { execute, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

/**
 * Execution for SOFA's operations. SOFA builds one fixed document per route at start-up and runs
 * it on every request, so each is compiled once (graphql-jit) into a function that executes the
 * field without graphql-js's per-request work (collecting fields, looking up resolvers and
 * serializers, building each field's info). A document graphql-jit cannot compile runs on
 * graphql-js as before.
 */
export function createCompiledExecute() {
  const compiled = new WeakMap<DocumentNode, CompiledQuery | null>();
  return function executeCompiled(args: ExecutionArgs): Promise<ExecutionResult> | ExecutionResult {
    let query = compiled.get(args.document);
    if (query === undefined) {
      const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
      query = isCompiledQuery(result) ? result : null;
      compiled.set(args.document, query);
    }
    if (!query) return execute(args);
    return query.query(args.rootValue, args.contextValue, args.variableValues ?? {}) as Promise<ExecutionResult> | ExecutionResult;
  };
}
