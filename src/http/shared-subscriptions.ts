import { createSourceEventStream, execute, print, type DocumentNode, type ExecutionArgs, type ExecutionResult, type GraphQLError } from 'graphql';

// Results per event object, then per (project, query, variables): subscribers on this process
// that asked for the same thing get one execution, not one each.
const resultsByEvent = new WeakMap<object, Map<string, Promise<ExecutionResult>>>();
const printed = new WeakMap<DocumentNode, string>();

function keyOf(args: ExecutionArgs, scope: string): string {
  let text = printed.get(args.document);
  if (text === undefined) printed.set(args.document, (text = print(args.document)));
  return `${scope}\n${args.operationName ?? ''}\n${JSON.stringify(args.variableValues ?? {})}\n${text}`;
}

/**
 * Subscribe for graphql-ws that executes each event once per distinct subscription: with a
 * thousand subscribers on one conversation, an event costs one GraphQL execution instead of a
 * thousand. `scope` must capture everything the result may depend on besides the event, the
 * query and its variables (the caller's project). Events that are not objects are executed
 * per subscriber. Unsubscribing ends the source at once.
 */
export async function subscribeShared(
  args: ExecutionArgs,
  scope: string,
  mapError: (e: GraphQLError) => GraphQLError,
): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const masked = (r: ExecutionResult): ExecutionResult => (r.errors ? { ...r, errors: r.errors.map(mapError) } : r);
  const source = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in Object(source))) return masked(source as ExecutionResult);
  const events = source as AsyncIterableIterator<unknown>;
  const key = keyOf(args, scope);
  const run = (payload: unknown) => {
    // graphql-js's execute runs the subscription's selection on one event, as its subscribe does.
    const once = async () => masked(await execute({ ...args, rootValue: payload }));
    if (payload === null || typeof payload !== 'object') return once();
    let byKey = resultsByEvent.get(payload);
    if (!byKey) resultsByEvent.set(payload, (byKey = new Map()));
    let result = byKey.get(key);
    if (!result) byKey.set(key, (result = once()));
    return result;
  };
  const iterator: AsyncIterableIterator<ExecutionResult> = {
    [Symbol.asyncIterator]: () => iterator,
    async next() {
      const r = await events.next();
      if (r.done) return { value: undefined, done: true };
      return { value: await run(r.value), done: false };
    },
    async return() {
      await events.return?.();
      return { value: undefined, done: true };
    },
    async throw(err) {
      await events.return?.();
      throw err;
    },
  };
  return iterator;
}
