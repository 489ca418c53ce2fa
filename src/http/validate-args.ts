import {
  type GraphQLArgument,
  type GraphQLInputType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
} from 'graphql';
import { InvalidLimit, InvalidRequest } from '../errors.ts';

/**
 * Validates and coerces REST input against a field's GraphQL arguments at the edge,
 * so bad input is a 400 naming the parameter (never a 500 from variable coercion).
 * Values may come from JSON (typed) or from query strings and forms (strings).
 */
export function coerceArgs(args: readonly GraphQLArgument[], input: Record<string, unknown>, bodyKeys: string[]): Record<string, unknown> {
  const known = new Set(args.map((a) => a.name));
  for (const key of bodyKeys) {
    if (!known.has(key)) throw new InvalidRequest(`Unknown parameter: ${key}.`, key);
  }
  const out: Record<string, unknown> = {};
  for (const arg of args) {
    const value = input[arg.name];
    // A query string's `?name=` is read as absent, unless the argument says an empty value is a
    // value of its own (extensions.emptyIsValue: its service then judges it, e.g. a 400).
    if (value === undefined || (value === '' && arg.extensions?.emptyIsValue !== true)) {
      if (isNonNullType(arg.type)) throw new InvalidRequest(`${arg.name} is required.`, arg.name);
      continue;
    }
    out[arg.name] = coerce(arg.type, value, arg.name);
  }
  return out;
}

function fail(param: string, what: string): never {
  if (param === 'limit') throw new InvalidLimit();
  throw new InvalidRequest(`${param} must be ${what}.`, param);
}

function coerce(type: GraphQLInputType, value: unknown, param: string): unknown {
  if (isNonNullType(type)) {
    if (value === null) fail(param, 'present');
    return coerce(type.ofType, value, param);
  }
  if (value === null) return null;
  if (isListType(type)) {
    const items = Array.isArray(value) ? value : isPlainObject(value) && Object.keys(value).every((k) => /^\d+$/.test(k)) ? Object.values(value) : [value];
    return items.map((v, i) => coerce(type.ofType, v, `${param}[${i}]`));
  }
  if (isInputObjectType(type)) {
    if (!isPlainObject(value)) fail(param, 'an object');
    const fields = type.getFields();
    const obj: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      if (!(key in fields)) throw new InvalidRequest(`Unknown parameter: ${param}.${key}.`, `${param}.${key}`);
    }
    for (const f of Object.values(fields)) {
      const v = (value as Record<string, unknown>)[f.name];
      if (v === undefined) {
        if (isNonNullType(f.type)) throw new InvalidRequest(`${param}.${f.name} is required.`, `${param}.${f.name}`);
        continue;
      }
      obj[f.name] = coerce(f.type, v, `${param}.${f.name}`);
    }
    return obj;
  }
  if (isEnumType(type)) {
    if (typeof value !== 'string' || !type.getValue(value)) fail(param, `one of ${type.getValues().map((v) => v.name).join(', ')}`);
    return value;
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case 'Int': {
        const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*[-+]?\d+\s*$/.test(value) ? Number(value) : NaN;
        if (!Number.isInteger(n)) fail(param, 'an integer');
        // A huge page size is still an integer: it clamps (to 100 in the list) rather than failing.
        if (param === 'limit') return Math.max(-2_147_483_648, Math.min(2_147_483_647, n));
        if (Math.abs(n) > 2_147_483_647) fail(param, 'an integer');
        return n;
      }
      case 'SafeInt': {
        const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*[-+]?\d+\s*$/.test(value) ? Number(value) : NaN;
        if (!Number.isSafeInteger(n)) fail(param, 'an integer');
        return n;
      }
      case 'Float': {
        const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
        if (!Number.isFinite(n)) fail(param, 'a number');
        return n;
      }
      case 'Boolean':
        if (value === true || value === 'true') return true;
        if (value === false || value === 'false') return false;
        return fail(param, 'a boolean');
      case 'String':
        if (typeof value !== 'string') fail(param, 'a string');
        return value;
      case 'ID':
        if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) fail(param, 'an id string');
        return String(value);
      default:
        return value;
    }
  }
  return value;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
