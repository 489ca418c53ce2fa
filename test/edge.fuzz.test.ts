// Property-based fuzzing of the edge: every route of /v1/openapi.json and every GraphQL mutation,
// with generated hostile values (NUL, unpaired surrogates, invalid UTF-8, huge numbers, deep or
// odd shapes). Never a 5xx, always the contract's error body, and a refused request writes nothing.
import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  type GraphQLInputType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/index.ts';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
let key: string;
const ids: Record<string, string> = {};

const TABLES = ['contacts', 'conversations', 'messages', 'webhooks', 'webhook_secrets', 'destinations', 'events', 'deliveries', 'dlq_entries', 'replay_jobs', 'api_keys', 'projects'];
async function rowCounts(): Promise<string> {
  const { rows } = await app.rt.db.pool.query(`SELECT ${TABLES.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(', ')}`);
  return JSON.stringify(rows[0]);
}

beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey: key } = await app.project('enterprise'));
  const contact = await app.api(key, 'POST', '/v1/contacts', { username: 'ana', phone_number: '+15550100' });
  ids.contact = contact.body.id;
  ids.conversation = contact.body.conversation_id;
  const message = await app.api(key, 'POST', '/v1/messages', { conversation_id: ids.conversation, message: 'hi' });
  ids.message = message.body.id;
  const webhook = await app.api(key, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/x' });
  ids.webhook = webhook.body.id;
});
afterAll(async () => {
  await app?.stop();
});

const hostileString = fc.oneof(
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\ud83d', '%00', '../../etc', '', ' ', '\u202e', '\ufeff', 'null', '-1', '1e309'),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ maxLength: 10 }).map((s) => `${s}\u0000`),
  fc.constant('x'.repeat(5_000)),
);
const hostileValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    hostileString,
    fc.constantFrom(Number.MAX_SAFE_INTEGER, -1, 0, 1.5, 2 ** 31, -(2 ** 63), true, false, null),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(hostileString, tie('value'), { maxKeys: 3 }),
  ),
})).value;

function expectContractAnswer(what: string, status: number, body: any) {
  expect(status, `${what} → ${status} ${JSON.stringify(body)?.slice(0, 300)}`).toBeLessThan(500);
  if (status >= 400) {
    expect(typeof body?.error?.code, `${what}: ${JSON.stringify(body)?.slice(0, 300)}`).toBe('string');
    expect(typeof body?.error?.message).toBe('string');
  }
}

interface Operation {
  method: string;
  path: string;
  pathParams: string[];
  queryParams: string[];
  bodyFields: string[];
}

async function documentedOperations(): Promise<Operation[]> {
  const res = await app.api(null, 'GET', '/v1/openapi.json');
  expect(res.status).toBe(200);
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<any>(res.body.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const params: any[] = [...(item.parameters ?? []), ...(op.parameters ?? [])];
      const bodySchema = op.requestBody?.content?.['application/json']?.schema;
      const resolved = bodySchema?.$ref ? res.body.components?.schemas?.[bodySchema.$ref.split('/').pop()] : bodySchema;
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        queryParams: params.filter((p) => p.in === 'query').map((p) => p.name),
        bodyFields: Object.keys(resolved?.properties ?? {}),
      });
    }
  }
  return ops;
}

function realIdFor(path: string): string {
  if (path.includes('contacts')) return ids.contact;
  if (path.includes('conversations')) return ids.conversation;
  if (path.includes('messages')) return ids.message;
  return ids.webhook;
}

describe('hostile input at the edge', () => {
  it('every documented /v1 route answers hostile values with a 4xx contract error (or success), never a 5xx, and a refusal writes nothing', async () => {
    const ops = await documentedOperations();
    const seen = new Map<number, number>();
    expect(ops.length).toBeGreaterThan(30);
    for (const op of ops) {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.oneof(hostileString, fc.constant(null)), { minLength: op.pathParams.length, maxLength: op.pathParams.length }),
          fc.dictionary(fc.constantFrom(...op.queryParams, 'limit', 'cursor', 'x\u0000'), hostileString, { maxKeys: 3 }),
          fc.dictionary(fc.constantFrom(...op.bodyFields, 'name', 'url', 'k\u0000'), hostileValue, { maxKeys: 4 }),
          fc.boolean(),
          async (pathValues, query, body, rawBytes) => {
            let i = 0;
            const path = op.path.replace(/\{[^}]+\}/g, () => {
              const v = pathValues[i++];
              return encodeURIComponent(v === null ? realIdFor(op.path) : (v as string)).replace(/%2F/gi, '/') || 'x';
            });
            const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, v as string])).toString();
            const url = `${app.url}${path}${qs ? `?${qs}` : ''}`;
            const before = await rowCounts();
            let payload: BodyInit | undefined;
            if (op.method !== 'GET' && op.method !== 'DELETE') {
              // Now and then a body that is not UTF-8 at all.
              payload = rawBytes ? Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc0, 0x80]), Buffer.from('"}')]) : JSON.stringify(body);
            }
            const res = await fetch(url, { method: op.method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: payload });
            const text = await res.text();
            let parsed: any = null;
            try {
              parsed = JSON.parse(text);
            } catch {
              /* checked below */
            }
            expectContractAnswer(`${op.method} ${url}`, res.status, parsed);
            seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
            if (res.status >= 400) expect(await rowCounts(), `${op.method} ${url} was refused but wrote`).toBe(before);
          },
        ),
        { numRuns: 15, seed: 7, endOnFailure: true },
      );
    }
    // The hostile values reached the edge's checks (not only the router's 404s).
    expect(seen.get(400) ?? 0).toBeGreaterThan(ops.length);
  }, 180_000);

  it('every GraphQL mutation answers hostile arguments with coded errors, never an internal one, and a refusal writes nothing', async () => {
    const hostileFor = (type: GraphQLInputType, depth = 0): fc.Arbitrary<unknown> => {
      if (isNonNullType(type)) return hostileFor(type.ofType, depth);
      if (isListType(type)) return fc.array(hostileFor(type.ofType, depth + 1), { maxLength: 2 });
      if (isInputObjectType(type)) {
        if (depth > 3) return fc.constant({});
        const fields = Object.values(type.getFields());
        return fc.record(Object.fromEntries(fields.map((f) => [f.name, hostileFor(f.type, depth + 1)])), { requiredKeys: fields.filter((f) => isNonNullType(f.type)).map((f) => f.name) });
      }
      if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
      if (isScalarType(type) && ['Int', 'Float'].includes(type.name)) return fc.constantFrom(0, -1, 2 ** 31 - 1, 5);
      if (isScalarType(type) && type.name === 'Boolean') return fc.boolean();
      if (isScalarType(type) && type.name === 'String') return hostileString;
      if (isScalarType(type) && type.name === 'ID') return fc.oneof(hostileString, fc.constant(ids.webhook), fc.constant(ids.contact));
      return hostileValue;
    };
    const mutations = Object.values(schema.getMutationType()!.getFields());
    expect(mutations.length).toBeGreaterThan(20);
    for (const field of mutations) {
      const decl = field.args.map((a) => `$${a.name}: ${String(a.type)}`).join(', ');
      const call = field.args.map((a) => `${a.name}: $${a.name}`).join(', ');
      const selection = isScalarType(getNamedType(field.type)) || isEnumType(getNamedType(field.type)) ? '' : ' { __typename }';
      const query = `mutation${decl ? `(${decl})` : ''} { ${field.name}${call ? `(${call})` : ''}${selection} }`;
      await fc.assert(
        fc.asyncProperty(fc.record(Object.fromEntries(field.args.map((a) => [a.name, hostileFor(a.type)]))), async (variables) => {
          const before = await rowCounts();
          const res = await app.api(key, 'POST', '/graphql', { query, variables });
          expect(res.status, `${field.name}: ${JSON.stringify(res.body)?.slice(0, 300)}`).toBeLessThan(500);
          const errors: any[] = res.body?.errors ?? [];
          for (const e of errors) expect(e.extensions?.code, `${field.name}: ${JSON.stringify(e).slice(0, 300)}`).not.toBe('internal');
          if (errors.length > 0 && !res.body?.data?.[field.name]) expect(await rowCounts(), `${field.name} was refused but wrote`).toBe(before);
        }),
        { numRuns: 15, seed: 11, endOnFailure: true },
      );
    }
  }, 180_000);
});
