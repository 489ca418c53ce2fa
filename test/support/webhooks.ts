import { expect } from 'vitest';
import { setProjectQuota } from '../../src/projects/service.ts';
import type { TestApp } from './app.ts';

/** An Enterprise project whose ingest rate limit is out of the way of tests that ingest in quick succession. */
export async function ingestingProject(app: TestApp) {
  const p = await app.project('enterprise');
  await setProjectQuota(app.rt, p.projectId, 'ingest_rate', '1000000');
  return p;
}

/** Creates a webhook over REST (default destination https://example.com/hook) and returns the create answer. */
export async function createWebhook(app: TestApp, apiKey: string, body: Record<string, unknown> = {}) {
  const res = await app.api(apiKey, 'POST', '/v1/webhooks', { name: 'hook', url: 'https://example.com/hook', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; publicId: string; ingestUrl: string; ingestSecret: string; signingSecret: string; status: string; [k: string]: unknown };
}

/** Posts to a webhook's ingest URL on this server. */
export async function ingest(
  app: TestApp,
  publicId: string,
  opts: { body?: string | Buffer; headers?: Record<string, string>; method?: string; path?: string } = {},
) {
  const body = opts.body ?? '{"hello":"world"}';
  const res = await fetch(`${app.url}/i/${publicId}${opts.path ?? ''}`, {
    method: opts.method ?? 'POST',
    headers: { 'content-type': 'application/json', ...opts.headers },
    body: opts.method === 'GET' || opts.method === 'HEAD' ? undefined : typeof body === 'string' ? body : new Uint8Array(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
