import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';

function toSeconds(value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : typeof value === 'number' ? value * 1000 : NaN;
  if (!Number.isFinite(ms)) throw new GraphQLError(`UnixTime cannot represent ${String(value)}`);
  return Math.floor(ms / 1000);
}

function fromSeconds(value: unknown): Date {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new GraphQLError('UnixTime must be an integer number of seconds');
  return new Date(value * 1000);
}

/**
 * Integer Unix time in seconds, the conversation part's timestamp format. Output accepts a Date
 * or an ISO string (rows that travelled through pub/sub as JSON), so no reviving is needed.
 * A scalar of its own rather than Int: Int is 32-bit and would overflow in 2038.
 */
export const UnixTimeResolver = new GraphQLScalarType<Date, number>({
  name: 'UnixTime',
  description: 'Integer Unix time in seconds.',
  // How SOFA documents it in /v1/openapi.json.
  extensions: { jsonSchema: { type: 'integer', format: 'int64', description: 'Unix time in seconds' } },
  serialize: toSeconds,
  parseValue: fromSeconds,
  parseLiteral(ast) {
    if (ast.kind !== Kind.INT) throw new GraphQLError('UnixTime must be an integer number of seconds');
    return new Date(Number(ast.value) * 1000);
  },
});
