import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('GET /v1/project', () => {
  it('shows the project with its effective quotas and current usage', async () => {
    const { apiKey, projectId } = await app.project('pro', 'acme');
    const res = await app.api(apiKey, 'GET', '/v1/project');
    expect(res.status).toBe(200);
    console.log(JSON.stringify(res.body));
  });
});
