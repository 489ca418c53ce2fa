import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import outboundBeforeIssue32 from './fixtures/openapi-outbound-webhooks.before-issue-32.json' with { type: 'json' };
import { NotFound } from '../src/errors.ts';
import { schema } from '../src/schema/index.ts';
import { unmappedScalars } from '../src/http/openapi.ts';
import { createRestSofa, restOpenApiDocument } from '../src/http/rest.ts';
import { BYTES_ROUTES, REST_ROUTES } from '../src/http/routes.ts';
import { startTestApp, type TestApp } from './support/app.ts';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
const WRITES = new Set(['put', 'post', 'patch']);
const REFERENCE_PATHS = new Set(['/v1/openapi.json', '/v1/openapi.yaml']);

let app: TestApp;
let apiKey: string;
let doc: any;

beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await app.project('free'));
  const res = await fetch(`${app.url}/v1/openapi.json`);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = await res.json();
});
afterAll(async () => {
  await app?.stop();
});

function operations(paths: any = doc.paths) {
  const out: { path: string; method: string; op: any }[] = [];
  for (const [p, item] of Object.entries<any>(paths)) {
    for (const m of METHODS) if (item[m]) out.push({ path: p, method: m, op: item[m] });
  }
  return out;
}

/** A `$ref` inside the document, followed. */
function resolve(node: any): any {
  if (!node?.$ref) return node;
  return resolve(node.$ref.slice(2).split('/').reduce((o: any, k: string) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc));
}

const v1Path = (route: { path: string }) => `/v1${route.path}`.replace(/:([a-zA-Z_]+)/g, '{$1}');

describe('the OpenAPI document', () => {
  it('is one valid OpenAPI 3.1 document (swagger-parser)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeTruthy();
  });

  it('has a schema for every custom GraphQL scalar (no dangling $ref)', () => {
    expect(unmappedScalars(schema)).toEqual([]);
    expect(JSON.stringify(doc)).not.toContain('#/components/schemas/JSON');
  });

  it('is the same document however many times a process builds it, each JSON field with its own description', async () => {
    // SOFA wrote an argument's description into the scalar schema it was given: a second build
    // in one process (tests start several apps) gave the retry policy's description to every
    // JSON field of the document.
    const again = await restOpenApiDocument(createRestSofa(schema), schema);
    const third = await restOpenApiDocument(createRestSofa(schema), schema);
    expect(third).toEqual(again);
    expect(again).toEqual(doc);
    const customHeaders = (again as any).components.schemas.CreatedWebhook.properties.customHeaders;
    expect(customHeaders.description).not.toMatch(/maxAttempts/);
  });

  it('lints without errors against the Redocly recommended rules', async () => {
    const dir = path.resolve('.tmp', `openapi-lint-${process.pid}`);
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, 'openapi.json');
    await writeFile(file, JSON.stringify(doc, null, 2));
    try {
      const cli = path.resolve('node_modules/@redocly/cli/bin/cli.js');
      const run = await promisify(execFile)(process.execPath, [cli, 'lint', file, '--extends=recommended', '--format=json'], {
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        timeout: 60_000,
        maxBuffer: 16 * 1024 * 1024,
      }).catch((err) => err as { stdout: string; stderr: string });
      const report = JSON.parse(run.stdout);
      const errors = report.problems.filter((p: any) => p.severity === 'error').map((p: any) => `${p.ruleId} ${p.location?.[0]?.pointer}: ${p.message}`);
      expect(errors).toEqual([]);
      expect(report.totals.errors).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is served as YAML too, the same document', async () => {
    const res = await fetch(`${app.url}/v1/openapi.yaml`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/yaml/);
    expect(YAML.parse(await res.text())).toEqual(doc);
  });

  it('documents exactly the routes of the route table under /v1', () => {
    const documented = operations()
      .filter(({ path: p }) => p.startsWith('/v1/') && !REFERENCE_PATHS.has(p))
      .map(({ path: p, method }) => `${method.toUpperCase()} ${p}`)
      .sort();
    const served = [...REST_ROUTES, ...BYTES_ROUTES].map((r) => `${r.method} ${v1Path(r)}`).sort();
    expect(documented).toEqual(served);
  });

  it('every documented operation is served, and every served path prefix is documented', async () => {
    const noRoute = new NotFound('route').message;
    for (const { path: p, method } of operations()) {
      const url = app.url + p.replace(/\{[^}]+\}/g, 'x_unknown');
      const res = await fetch(url, {
        method: method.toUpperCase(),
        headers: { authorization: `Bearer ${apiKey}`, ...(WRITES.has(method) ? { 'content-type': 'application/json' } : {}) },
        body: WRITES.has(method) ? '{}' : undefined,
      });
      const body = await res.text();
      expect(res.status, `${method} ${p}`).not.toBe(405);
      if (res.status === 404) expect(JSON.parse(body).error.message, `${method} ${p}`).not.toBe(noRoute);
    }
    const undocumented = await app.api(apiKey, 'GET', '/v1/not-a-route');
    expect(undocumented.body.error.message).toBe(noRoute);

    // GraphQL has its own schema (/graphql); /docs is the page that renders this document.
    const notRest = new Set(['/graphql', '/docs']);
    const paths = Object.keys(doc.paths);
    for (const prefix of app.http!.servedPrefixes.filter((p) => !notRest.has(p))) {
      expect(
        paths.some((p) => p === prefix || p.startsWith(`${prefix}/`)),
        `${prefix} is served but not documented`,
      ).toBe(true);
    }
  });

  it('gives every operation a unique operationId, one known tag, a summary, a description and its error answers', () => {
    const tags = new Set(doc.tags.map((t: any) => t.name));
    const ids = new Set<string>();
    for (const { path: p, method, op } of [...operations(), ...operations(doc.webhooks)]) {
      const where = `${method} ${p}`;
      expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
      expect(ids.has(op.operationId), `${where}: duplicate operationId`).toBe(false);
      ids.add(op.operationId);
      expect(op.tags, where).toHaveLength(1);
      expect(tags.has(op.tags[0]), where).toBe(true);
      expect(op.summary?.length, where).toBeGreaterThan(3);
      expect(op.description?.length, where).toBeGreaterThan(3);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (!/^[45]/.test(status) || !resolve(response).content) continue;
        expect(resolve(response).content['application/json'].schema, `${where} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
      }
    }
    for (const route of REST_ROUTES) {
      const op = doc.paths[v1Path(route)][route.method.toLowerCase()];
      const where = `${route.method} ${route.path}`;
      const statuses = Object.keys(op.responses);
      expect(op.operationId).toBe(route.operationId);
      expect(op.tags).toEqual([route.tag]);
      expect(statuses.filter((s) => s.startsWith('2')), where).toEqual([String(route.status ?? 200)]);
      for (const s of ['401', '500', '503']) expect(statuses, where).toContain(s);
      if (route.path.includes(':') || route.errors?.includes('not_found')) expect(statuses, where).toContain('404');
      if (route.method !== 'GET' && route.method !== 'DELETE') expect(statuses, where).toEqual(expect.arrayContaining(['400', '413']));
      if (route.errors?.includes('tier_required')) {
        const forbidden = resolve(op.responses['403']).content['application/json'];
        expect(Object.values<any>(forbidden.examples)[0].value.error).toMatchObject({ code: 'tier_required', feature: expect.any(String), requiredTier: expect.any(String) });
      } else expect(statuses, where).not.toContain('403');
      if (route.errors?.some((e) => e === 'invalid_state' || e === 'payload_gone' || e === 'replay_quotas')) expect(statuses, where).toContain('409');
      if (route.errors?.includes('replay_quotas')) {
        const tooMany = resolve(op.responses['429']);
        expect(resolve(tooMany.headers['Retry-After']).schema.type).toBe('integer');
        expect(Object.values<any>(tooMany.content['application/json'].examples).map((e) => e.value.error.quota).sort()).toEqual(['monthly_deliveries', 'replay_volume']);
      }
    }
    const detail = doc.components.schemas.ErrorDetail.properties;
    for (const f of ['code', 'message', 'param', 'feature', 'requiredTier', 'quota', 'scope', 'limit', 'current', 'delta', 'retryAfterSec']) expect(detail[f], f).toBeTruthy();
  });

  it('declares no body field of a write as a query parameter; conversation writes take forms too', () => {
    for (const { path: p, method, op } of operations()) {
      if (!WRITES.has(method)) continue;
      expect((op.parameters ?? []).filter((x: any) => resolve(x).in === 'query'), `${method} ${p}`).toEqual([]);
      const body = op.requestBody?.content?.['application/json']?.schema;
      for (const param of (op.parameters ?? []).map(resolve).filter((x: any) => x.in === 'path')) {
        expect(body?.properties?.[param.name], `${method} ${p}: ${param.name} is in the path`).toBeUndefined();
      }
    }
    for (const route of REST_ROUTES.filter((r) => r.tag === 'Contacts' || r.tag === 'Messages')) {
      if (route.method === 'GET' || route.method === 'DELETE') continue;
      const content = doc.paths[v1Path(route)][route.method.toLowerCase()].requestBody.content;
      expect(Object.keys(content).sort(), route.path).toEqual(['application/json', 'application/x-www-form-urlencoded']);
    }
    const create = doc.paths['/v1/contacts'].post.requestBody.content['application/json'].schema;
    expect(create.required.sort()).toEqual(['phone_number', 'username']);
  });

  it('documents the cursor lists once and reuses them', () => {
    expect(doc.components.parameters.Limit.schema).toEqual({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
    expect(doc.components.parameters.ConversationLimit.schema).toEqual({ type: 'integer', minimum: 1, maximum: 100, default: 10 });
    for (const route of REST_ROUTES.filter((r) => r.method === 'GET')) {
      const op = doc.paths[v1Path(route)].get;
      const refs = (op.parameters ?? []).map((x: any) => x.$ref).filter(Boolean);
      const names = (op.parameters ?? []).map((x: any) => resolve(x).name);
      if (names.includes('cursor')) {
        expect(refs, route.path).toContain('#/components/parameters/Cursor');
        if (!route.pageSize) expect(refs, route.path).toContain('#/components/parameters/Limit');
        const page = resolve(op.responses['200'].content['application/json'].schema);
        expect(Object.keys(page.properties).sort(), route.path).toEqual(['items', 'nextCursor']);
        expect(page.properties.nextCursor.type).toEqual(['string', 'null']);
      }
      if (names.includes('starting_after')) {
        expect(refs, route.path).toEqual(expect.arrayContaining(['#/components/parameters/ConversationLimit', '#/components/parameters/StartingAfter', '#/components/parameters/EndingBefore']));
      }
    }
    expect(doc.paths['/v1/contacts'].get.parameters.map((x: any) => resolve(x).name)).toContain('active');
    expect(resolve(doc.paths['/v1/dlq/export'].get.parameters.find((x: any) => resolve(x).name === 'limit')).schema.maximum).toBe(20);
  });

  it('describes ingest, health, and the outbound delivery with its Standard Webhooks headers', () => {
    const ingest = doc.paths['/i/{publicId}'].post;
    expect(Object.keys(ingest.responses).sort()).toEqual(['200', '202', '400', '401', '404', '409', '413', '422', '429', '500', '503']);
    expect(ingest.security.map((s: any) => Object.keys(s)[0]).sort()).toEqual(['ingestBearer', 'ingestSecret', 'standardWebhooksSignature']);
    expect(ingest.parameters.map((x: any) => x.name)).toEqual(expect.arrayContaining(['x-service-deliver-at', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'Idempotency-Key']));
    // CONTRACT §12: the idempotency and browser-form answers of form ingest, and its preflight.
    const form = doc.paths['/f/{publicId}'];
    expect(Object.keys(form.post.responses)).toEqual(expect.arrayContaining(['403', '409', '422']));
    expect(form.post.parameters.map((x: any) => x.name)).toEqual(expect.arrayContaining(['Idempotency-Key', 'Origin']));
    expect(Object.keys(form.options.responses)).toEqual(['204', '404']);
    expect(JSON.stringify(form.post.responses['403'])).toContain('origin_not_allowed');
    expect(JSON.stringify(ingest.responses['422'])).toContain('idempotency_key_reused');
    expect(JSON.stringify(ingest.responses['409'])).toContain('idempotency_key_in_progress');
    expect(doc.paths['/v1/webhooks/{id}/email-allowlist'].post.responses['409']).toBeDefined();
    expect(resolve(ingest.responses['202'].content['application/json'].schema).properties.status.enum).toEqual(['queued', 'scheduled', 'duplicate']);
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(Object.keys(doc.paths['/readyz'].get.responses)).toEqual(['200', '503']);
    const delivery = doc.webhooks.delivery.post;
    expect(delivery.parameters.filter((x: any) => x.required).map((x: any) => x.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    expect(delivery.description).toContain("from 'standardwebhooks'");
  });
});

describe('the producers part (issue 32, CONTRACT §12)', () => {
  const schemaOf = (response: any) => resolve(resolve(response).content['application/json'].schema);
  const errorCodes = (response: any) => Object.values<any>(resolve(response).content['application/json'].examples ?? {}).map((e) => e.value.error.code);
  const paramNames = (op: any) => op.parameters.map((x: any) => resolve(x).name);

  it('describes the email allowlist routes with their answers and errors', () => {
    const list = doc.paths['/v1/webhooks/{id}/email-allowlist'];
    expect(paramNames(list.get)).toEqual(expect.arrayContaining(['id', 'cursor', 'limit']));
    expect(schemaOf(list.get.responses['200']).properties.items.items.$ref).toBe('#/components/schemas/EmailAllowlistEntry');
    expect(resolve(list.post.requestBody.content['application/json'].schema)).toMatchObject({ required: ['pattern'], properties: { pattern: { type: 'string' } } });
    expect(Object.keys(list.post.responses)).toEqual(expect.arrayContaining(['201', '400', '403', '404', '409']));
    expect(schemaOf(list.post.responses['201']).required).toEqual(expect.arrayContaining(['id', 'pattern', 'createdAt']));
    expect(errorCodes(list.post.responses['409'])).toContain('already_exists');
    expect(errorCodes(list.post.responses['403'])).toContain('tier_required');
    expect(errorCodes(list.post.responses['400'])).toContain('invalid_request');
    const del = doc.paths['/v1/webhooks/{id}/email-allowlist/{entryId}'].delete;
    expect(Object.keys(del.responses)).toEqual(expect.arrayContaining(['200', '403', '404']));
    expect(Object.keys(schemaOf(del.responses['200']).properties)).toEqual(expect.arrayContaining(['id', 'deleted']));
  });

  it('describes the new webhook controls, the delivery field and its filter, and provider secret rotation', () => {
    const controls = ['idempotencyWindowSeconds', 'formAccess', 'formAllowedOrigins'];
    for (const name of ['Webhook', 'CreatedWebhook']) expect(Object.keys(doc.components.schemas[name].properties)).toEqual(expect.arrayContaining(controls));
    const create = resolve(doc.paths['/v1/webhooks'].post.requestBody.content['application/json'].schema);
    const update = resolve(doc.paths['/v1/webhooks/{id}'].patch.requestBody.content['application/json'].schema);
    for (const body of [create, update]) expect(Object.keys(body.properties)).toEqual(expect.arrayContaining(controls));
    expect(doc.components.schemas.Delivery.properties.idempotencyKey.type).toEqual(['string', 'null']);
    for (const p of ['/v1/deliveries', '/v1/webhooks/{id}/deliveries']) expect(paramNames(doc.paths[p].get), p).toContain('idempotencyKey');
    const provider = resolve(doc.paths['/v1/webhooks/{id}/provider'].put.requestBody.content['application/json'].schema);
    expect(provider.properties.graceSeconds.description).toMatch(/86400/);
  });

  it('describes the ingest answers: the idempotency errors with Retry-After, CORS headers on every form answer but the refusal, and Slack\'s challenge', () => {
    const ingest = doc.paths['/i/{publicId}'].post;
    const form = doc.paths['/f/{publicId}'];
    for (const op of [ingest, form.post]) {
      expect(paramNames(op)).toContain('Idempotency-Key');
      expect(errorCodes(op.responses['409'])).toEqual(expect.arrayContaining(['idempotency_key_in_progress', 'webhook_paused']));
      expect(op.responses['409'].headers['Retry-After']).toBeDefined();
      expect(errorCodes(op.responses['422'])).toEqual(['idempotency_key_reused']);
    }
    expect(schemaOf(ingest.responses['200']).required).toEqual(['challenge']);
    for (const [status, answer] of Object.entries<any>(form.post.responses)) {
      if (status === '403' || status.startsWith('5')) continue;
      expect(answer.headers?.['Access-Control-Allow-Origin'], status).toBeDefined();
    }
    expect(form.post.responses['403'].headers?.['Access-Control-Allow-Origin']).toBeUndefined();
    expect(errorCodes(form.post.responses['403'])).toEqual(['origin_not_allowed']);
    expect(Object.keys(form.options.responses['204'].headers)).toEqual(
      expect.arrayContaining(['Access-Control-Allow-Origin', 'Access-Control-Allow-Methods', 'Access-Control-Allow-Headers', 'Access-Control-Max-Age', 'Vary']),
    );
  });

  it('leaves the outbound `webhooks` section as it was before issue 32', () => {
    // The fixture is outboundWebhooks() of commit 64be55d (the parent of issue 32's first commit).
    expect(doc.webhooks).toEqual(outboundBeforeIssue32);
  });
});

describe('the reference page', () => {
  it('/docs answers a page that loads the document with a renderer served by this service', async () => {
    const res = await fetch(`${app.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const page = await res.text();
    expect(page).not.toMatch(/https?:\/\//);
    const assets = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets).toEqual(expect.arrayContaining(['/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css', '/docs/reference.js']));
    for (const asset of assets) {
      const r = await fetch(app.url + asset);
      expect(r.status, asset).toBe(200);
      if (asset === '/docs/reference.js') {
        const init = await r.text();
        expect(init).toContain("url: '/v1/openapi.json'");
        expect(init).toContain('validatorUrl: null');
      } else await r.arrayBuffer();
    }
    expect((await fetch(`${app.url}/docs/nothing.js`)).status).toBe(404);
  });
});
