import { expect } from 'vitest';
import type { TestApp } from './app.ts';

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
