import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
let apiKey: string;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await app.project('starter'));
});
afterAll(async () => {
  await app?.stop();
});

const errorBody = (code: string) => ({ error: expect.objectContaining({ code, message: expect.any(String) }) });

describe('REST error mapping', () => {
  it('malformed JSON and form bodies are 400 invalid_request, never 500', async () => {
    const bad = await app.api(apiKey, 'POST', '/v1/dlq/redrive', '{"webhookId": ', { 'content-type': 'application/json' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual(errorBody('invalid_request'));
    const array = await app.api(apiKey, 'POST', '/v1/dlq/redrive', '[1,2]', { 'content-type': 'application/json' });
    expect(array.status).toBe(400);
    const xml = await app.api(apiKey, 'POST', '/v1/dlq/redrive', '<a/>', { 'content-type': 'application/xml' });
    expect(xml.status).toBe(400);
  });

  it('unknown parameters and wrongly typed ones are 400 with param', async () => {
    const unknown = await app.api(apiKey, 'POST', '/v1/dlq/redrive', { nope: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: 'invalid_request', param: 'nope' });
    const typed = await app.api(apiKey, 'POST', '/v1/dlq/redrive', { webhookId: 5 });
    expect(typed.body.error).toMatchObject({ code: 'invalid_request', param: 'webhookId' });
    const limit = await app.api(apiKey, 'GET', '/v1/deliveries?limit=ten');
    expect(limit.status).toBe(400);
    expect(limit.body.error).toMatchObject({ code: 'invalid_limit', param: 'limit' });
    const cursor = await app.api(apiKey, 'GET', '/v1/deliveries?cursor=abc.def');
    expect(cursor.body.error.code).toBe('invalid_cursor');
  });

  it('form-encoded bodies with bracket notation reach the field as structured values', async () => {
    const res = await app.api(apiKey, 'POST', '/v1/dlq/redrive', 'webhookId=wh_x&from=2026-01-01T00%3A00%3A00Z', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(res.status).toBe(202);
    expect(res.body.filter).toMatchObject({ webhookId: 'wh_x', from: '2026-01-01T00:00:00Z' });
    const bad = await app.api(apiKey, 'POST', '/v1/dlq/redrive', 'webhookId[a][]=1', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'webhookId' });
  });

  it('management bodies over 1 MB are 413 payload_too_large', async () => {
    const big = JSON.stringify({ webhookId: 'x'.repeat(1024 * 1024 + 10) });
    const res = await app.api(apiKey, 'POST', '/v1/dlq/redrive', big);
    expect(res.status).toBe(413);
    expect(res.body).toEqual(errorBody('payload_too_large'));
    const gql = await app.api(apiKey, 'POST', '/graphql', big);
    expect(gql.status).toBe(413);
  });

  it('a malformed percent-encoding in a path parameter is 400, not 500', async () => {
    const res = await app.api(apiKey, 'GET', '/v1/deliveries/%E0%A4%A');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'id' });
  });

  it('domain errors keep their status and code; another project’s record is 404', async () => {
    const res = await app.api(apiKey, 'GET', '/v1/deliveries/del_unknown');
    expect(res.status).toBe(404);
    expect(res.body).toEqual(errorBody('not_found'));
  });
});

describe('GraphQL error mapping and guards', () => {
  it('carries the same code in extensions', async () => {
    const res = await app.api(apiKey, 'POST', '/graphql', { query: '{ delivery(id: "del_nope") { id } }' });
    expect(res.body.errors[0].extensions.code).toBe('not_found');
    const forbidden = await app.api((await app.project('free')).apiKey, 'POST', '/graphql', { query: 'mutation { redriveDlq { id } }' });
    expect(forbidden.body.errors[0].extensions).toMatchObject({ code: 'tier_required', feature: 'bulk_replay', requiredTier: 'starter' });
  });

  it('refuses documents deeper than 15 levels, with more than 200 aliases, or batches over 10, before execution', async () => {
    const deep = '{ ' + 'project { '.repeat(16) + 'id' + ' }'.repeat(16) + ' }';
    const depth = await app.api(apiKey, 'POST', '/graphql', { query: deep });
    expect(depth.body.errors.map((e: any) => e.message).join('\n')).toMatch(/depth/i);
    const aliases = Array.from({ length: 201 }, (_, i) => `a${i}: project { id }`).join(' ');
    const many = await app.api(apiKey, 'POST', '/graphql', { query: `{ ${aliases} }` });
    expect(many.body.errors.map((e: any) => e.message).join('\n')).toMatch(/alias/i);
    const batch = Array.from({ length: 11 }, () => ({ query: '{ project { id } }' }));
    const batched = await app.api(apiKey, 'POST', '/graphql', batch);
    expect(batched.status).toBeGreaterThanOrEqual(400);
    const fine = await app.api(apiKey, 'POST', '/graphql', batch.slice(0, 10));
    expect(fine.body).toHaveLength(10);
  });
});
