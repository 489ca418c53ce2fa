import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('API key authentication', () => {
  it('answers 401 with the contract body when the key is missing, malformed or unknown', async () => {
    for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer sk_nope' }] as Record<string, string>[]) {
      const res = await app.api(null, 'GET', '/v1/project', undefined, headers);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
    }
  });

  it('accepts a valid key on /v1 and /graphql, and refuses it once revoked', async () => {
    const { apiKey, projectId } = await app.project('free');
    const ok = await app.api(apiKey, 'GET', '/v1/project');
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id: projectId, tier: 'free' });

    const created = await app.api(apiKey, 'POST', '/graphql', { query: 'mutation { createApiKey(name: "second") { key apiKey { id } } }' });
    expect(created.status).toBe(200);
    const second = created.body.data.createApiKey;
    expect(second.key).toMatch(/^sk_/);

    const gql = await app.api(second.key, 'POST', '/graphql', { query: '{ project { id } }' });
    expect(gql.body.data.project.id).toBe(projectId);

    const revoked = await app.api(apiKey, 'POST', '/graphql', {
      query: 'mutation($id: ID!) { revokeApiKey(id: $id) { revokedAt } }',
      variables: { id: second.apiKey.id },
    });
    expect(revoked.body.data.revokeApiKey.revokedAt).toBeTruthy();
    expect((await app.api(second.key, 'GET', '/v1/project')).status).toBe(401);
    const gqlAfter = await app.api(second.key, 'POST', '/graphql', { query: '{ project { id } }' });
    expect(gqlAfter.status).toBe(401);
    expect(gqlAfter.body.errors[0].extensions.code).toBe('unauthorized');
  });

  it('stores only a hash of the key', async () => {
    const { apiKey, projectId } = await app.project('free');
    const rows = await app.rt.db.prisma.apiKey.findMany({ where: { projectId } });
    expect(JSON.stringify(rows)).not.toContain(apiKey);
  });
});

describe('routing and errors', () => {
  it('maps unknown routes to 404 and wrong methods to 405, with the contract body', async () => {
    const { apiKey } = await app.project();
    const missing = await app.api(apiKey, 'GET', '/v1/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    const wrong = await app.api(apiKey, 'DELETE', '/v1/project');
    expect(wrong.status).toBe(405);
    expect(wrong.body.error.code).toBe('method_not_allowed');
    const outside = await app.api(apiKey, 'GET', '/elsewhere');
    expect(outside.status).toBe(404);
  });

  it('serves health, readiness and the OpenAPI document', async () => {
    expect((await app.api(null, 'GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await app.api(null, 'GET', '/readyz')).status).toBe(200);
    const doc = await app.api(null, 'GET', '/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.paths['/v1/project']).toBeTruthy();
  });
});

describe('revocation across processes', () => {
  it('a key revoked on one instance stops working on another at once, despite lookup caching', async () => {
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const { apiKey } = await app.project('free');
      const created = await app.api(apiKey, 'POST', '/graphql', { query: 'mutation { createApiKey(name: "x") { key apiKey { id } } }' });
      const { key, apiKey: record } = created.body.data.createApiKey;
      expect((await other.api(key, 'GET', '/v1/project')).status).toBe(200); // now cached on `other`
      await app.api(apiKey, 'POST', '/graphql', { query: `mutation { revokeApiKey(id: "${record.id}") { id } }` });
      await new Promise((r) => setTimeout(r, 100));
      expect((await other.api(key, 'GET', '/v1/project')).status).toBe(401);
    } finally {
      await other.stop();
    }
  });
});
