import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destinationCredentials } from '../src/destinations/config.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let pro: string;
let free: string;
beforeAll(async () => {
  app = await startTestApp();
  pro = (await app.project('pro')).apiKey;
  free = (await app.project('free')).apiKey;
});
afterAll(async () => {
  await app?.stop();
});

const aws = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'very-secret-key' };
const VALID: Record<string, Record<string, unknown>> = {
  webhook: { url: 'https://example.com/in', method: 'PUT', headers: { 'x-env': 'prod' } },
  aws_sqs: { queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123/q', region: 'eu-west-1', credentials: aws },
  aws_eventbridge: { eventBusName: 'bus', region: 'eu-west-1', source: 'relay', detailType: 'event', credentials: aws },
  gcp_pubsub: { projectId: 'p', topic: 't', credentials: { client_email: 'svc@p.iam.gserviceaccount.com', private_key: '-----BEGIN PRIVATE KEY-----x' } },
  object_storage: { bucket: 'events', region: 'us-east-1', endpoint: 'http://127.0.0.1:4569', prefix: 'in/', forcePathStyle: true, credentials: aws },
};

const path = (whId: string, rest = '') => `/v1/webhooks/${whId}/destinations${rest}`;

describe('destinations', () => {
  it('adds one of each type, never returns credentials, and stores them encrypted', async () => {
    const wh = await createWebhook(app, pro);
    for (const [type, config] of Object.entries(VALID)) {
      const res = await app.api(pro, 'POST', path(wh.id), { name: `d-${type}`, type, config });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body).toMatchObject({ id: expect.stringMatching(/^dst_/), webhookId: wh.id, name: `d-${type}`, type, isDefault: false });
      expect(res.body.config).not.toHaveProperty('credentials');
      expect(res.body.hasCredentials).toBe(type !== 'webhook');
      expect(JSON.stringify(res.body)).not.toContain('very-secret-key');
      const row = await app.rt.db.prisma.destination.findUniqueOrThrow({ where: { id: res.body.id } });
      expect(JSON.stringify(row.config)).not.toContain('very-secret-key');
      expect(JSON.stringify(row.config)).not.toContain('PRIVATE KEY');
      if (type !== 'webhook') expect(destinationCredentials(row)).toEqual((config as any).credentials);
    }
    const list = await app.api(pro, 'GET', path(wh.id));
    expect(list.body.items).toHaveLength(6);
    expect(list.body.items[0].isDefault).toBe(true);
    expect(list.body.items.filter((d: any) => d.isDefault)).toHaveLength(1);
    expect(JSON.stringify(list.body)).not.toContain('very-secret-key');
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ['webhook', { url: 'ftp://x' }, 'config.url'],
    ['webhook', { url: 'https://x', method: 'GET' }, 'config.method'],
    ['webhook', { url: 'https://x', extra: 1 }, 'config.extra'],
    ['aws_sqs', { region: 'eu-west-1' }, 'config.queueUrl'],
    ['aws_sqs', { queueUrl: 'https://q', region: 'r', credentials: { accessKeyId: 'a' } }, 'config.credentials.secretAccessKey'],
    ['aws_eventbridge', { eventBusName: 'b', region: 'r', source: 's' }, 'config.detailType'],
    ['gcp_pubsub', { projectId: 'p', topic: 't' }, 'config.credentials'],
    ['object_storage', { bucket: 'ab', credentials: aws }, 'config.bucket'],
    ['object_storage', { bucket: 'abc', forcePathStyle: 'yes', credentials: aws }, 'config.forcePathStyle'],
    ['carrier_pigeon', {}, 'type'],
  ];
  for (const [type, config, param] of invalid) {
    it(`refuses a ${type} destination with bad ${param}`, async () => {
      const wh = await createWebhook(app, pro);
      const res = await app.api(pro, 'POST', path(wh.id), { name: 'x', type, config });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    });
  }

  it('needs Pro for typed destinations, checked before their config', async () => {
    const wh = await createWebhook(app, free);
    const res = await app.api(free, 'POST', path(wh.id), { name: 'q', type: 'aws_sqs', config: {} });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'typed_destinations', requiredTier: 'pro' });
    expect((await app.api(free, 'POST', path(wh.id), { name: 'w', type: 'webhook', config: { url: 'https://example.com' } })).status).toBe(201);
  });

  it('updates named and default destinations, keeping stored credentials when left out', async () => {
    const wh = await createWebhook(app, pro);
    const created = await app.api(pro, 'POST', path(wh.id), { name: 'queue', type: 'aws_sqs', config: VALID.aws_sqs });
    const renamed = await app.api(pro, 'PATCH', path(wh.id, `/${created.body.id}`), { name: 'queue-2', config: { queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123/q2', region: 'eu-west-1' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'queue-2', hasCredentials: true, config: { queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123/q2' } });
    const row = await app.rt.db.prisma.destination.findUniqueOrThrow({ where: { id: created.body.id } });
    expect(destinationCredentials(row)).toEqual(aws);

    const def = (await app.api(pro, 'GET', path(wh.id))).body.items[0];
    const changed = await app.api(pro, 'PATCH', path(wh.id, `/${def.id}`), { config: { url: 'https://example.com/other' } });
    expect(changed.body).toMatchObject({ isDefault: true, config: { url: 'https://example.com/other', method: 'POST' } });
    const retyped = await app.api(pro, 'PATCH', path(wh.id, `/${def.id}`), { type: 'aws_sqs' });
    expect(retyped.body.error).toMatchObject({ code: 'invalid_request', param: 'config' });
    const dup = await app.api(pro, 'PATCH', path(wh.id, `/${created.body.id}`), { name: 'default' });
    expect(dup.body.error).toMatchObject({ code: 'invalid_request', param: 'name' });
  });

  it('refuses to delete the default destination or one that routing uses (409)', async () => {
    const wh = await createWebhook(app, pro);
    const def = (await app.api(pro, 'GET', path(wh.id))).body.items[0];
    const del = await app.api(pro, 'DELETE', path(wh.id, `/${def.id}`));
    expect(del.status).toBe(409);
    expect(del.body.error.code).toBe('invalid_state');

    const named = await app.api(pro, 'POST', path(wh.id), { name: 'b', type: 'webhook', config: { url: 'https://example.com/b' } });
    await app.api(pro, 'PUT', `/v1/webhooks/${wh.id}/routing`, { rules: [{ name: 'to-b', priority: 1, match: { method: 'PUT' }, destinationId: named.body.id }] });
    const used = await app.api(pro, 'DELETE', path(wh.id, `/${named.body.id}`));
    expect(used.status).toBe(409);
    expect(used.body.error.code).toBe('invalid_state');

    await app.api(pro, 'PUT', `/v1/webhooks/${wh.id}/routing`, { rules: [] });
    const ok = await app.api(pro, 'DELETE', path(wh.id, `/${named.body.id}`));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ id: named.body.id, deleted: true });
    expect((await app.api(pro, 'DELETE', path(wh.id, `/${named.body.id}`))).status).toBe(404);
  });

  it('hides other projects’ destinations', async () => {
    const wh = await createWebhook(app, pro);
    const def = (await app.api(pro, 'GET', path(wh.id))).body.items[0];
    expect((await app.api(free, 'GET', path(wh.id))).status).toBe(404);
    expect((await app.api(free, 'PATCH', path(wh.id, `/${def.id}`), { name: 'x' })).status).toBe(404);
    const otherWh = await createWebhook(app, pro);
    expect((await app.api(pro, 'PATCH', path(otherWh.id, `/${def.id}`), { name: 'x' })).status).toBe(404);
  });
});
