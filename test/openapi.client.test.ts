import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import qs from 'qs';
import { Webhook } from 'standardwebhooks';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient, type ServiceClient } from '../clients/typescript/index.ts';
import { CLIENT_TYPES_PATH, clientTypesOf } from '../scripts/generate-client.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
let doc: object;

beforeAll(async () => {
  app = await startTestApp({ worker: true });
  doc = await (await fetch(`${app.url}/v1/openapi.json`)).json();
});
afterAll(async () => {
  await app?.stop();
});

describe('the generated TypeScript client', () => {
  it('is the one the live document generates (run `npm run client:generate`)', async () => {
    expect(await readFile(CLIENT_TYPES_PATH, 'utf8')).toBe(await clientTypesOf(doc));
  });

  it('typechecks, with a use of it', async () => {
    const dir = path.resolve('.tmp', `client-typecheck-${process.pid}`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(path.join(dir, 'schema.ts'), await clientTypesOf(doc));
      await writeFile(
        path.join(dir, 'use.ts'),
        `import createClient from 'openapi-fetch';
import type { paths } from './schema.ts';
const api = createClient<paths>({ baseUrl: 'http://127.0.0.1:1' });
export async function use() {
  const { data } = await api.POST('/v1/contacts', { body: { username: 'ana', phone_number: '1' } });
  const name: string | undefined = data?.username;
  const page = await api.GET('/v1/webhooks', { params: { query: { limit: 5, status: 'active' } } });
  const next: string | null | undefined = page.data?.nextCursor;
  const code: string | undefined = page.error?.error.code;
  return [name, next, code];
}
`,
      );
      const program = ts.createProgram([path.join(dir, 'use.ts')], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: [],
        lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      });
      const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(diagnostics).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('end to end through the generated client', () => {
  let api: ServiceClient;
  beforeAll(async () => {
    const { apiKey } = await app.project('free');
    api = createServiceClient({ baseUrl: app.url, apiKey });
  });

  it('contact, message, reaction (JSON and form bodies), lists and errors', async () => {
    const contact = await api.POST('/v1/contacts', { body: { username: 'ana', phone_number: '+351900000001' } });
    expect(contact.response.status).toBe(200);
    expect(contact.data).toMatchObject({ username: 'ana', display_name: null, last_active_at: null });
    const conversationId = contact.data!.conversation_id;

    const sent = await api.POST('/v1/messages', { body: { conversation_id: conversationId, message: 'hello' } });
    expect(sent.data).toMatchObject({ conversation_id: conversationId, message: 'hello', reactions: [], contact: { id: contact.data!.id } });
    const messageId = sent.data!.id;

    const liked = await api.PUT('/v1/messages/{id}', { params: { path: { id: messageId } }, body: { reactions: { like: ['bo'] } } });
    expect(liked.data?.reactions).toEqual([{ like: ['bo'] }]);
    // The same route with a form body, bracket notation, as documented.
    const form = await api.PUT('/v1/messages/{id}', {
      params: { path: { id: messageId } },
      body: { reactions: { like: ['cy'], heart: ['ana'] } },
      bodySerializer: (body) => qs.stringify(body, { arrayFormat: 'brackets' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.data?.reactions).toEqual([{ like: ['bo', 'cy'] }, { heart: ['ana'] }]);
    expect(form.data?.updated_at).toEqual(expect.any(Number));

    const list = await api.GET('/v1/messages', { params: { query: { conversation_id: conversationId, limit: 5 } } });
    expect(list.data).toMatchObject({ has_more: false, data: [{ id: messageId }] });
    const active = await api.GET('/v1/contacts', { params: { query: { active: true } } });
    expect(active.data?.data.map((c) => c.id)).toEqual([contact.data!.id]);

    const missing = await api.GET('/v1/contacts/{id}', { params: { path: { id: 'ct_unknown' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.error.code).toBe('not_found');
    const invalid = await api.POST('/v1/contacts', { body: { username: 'x' } as any });
    expect(invalid.response.status).toBe(400);
    expect(invalid.error?.error).toMatchObject({ code: 'invalid_request', param: 'phone_number' });
  });

  it('webhook, ingest, signed delivery, replay', async () => {
    const receiver = await startReceiver();
    try {
      const created = await api.POST('/v1/webhooks', { body: { name: 'orders', url: receiver.url } });
      expect(created.response.status).toBe(201);
      const webhook = created.data!;
      expect(webhook).toMatchObject({ status: 'active', ingestSecret: expect.stringMatching(/^whsec_/), signingSecret: expect.stringMatching(/^whsec_/) });

      const refused = await api.POST('/i/{publicId}', {
        params: { path: { publicId: webhook.publicId } },
        body: { order: 1 },
        headers: { authorization: 'Bearer whsec_wrong' },
      });
      expect(refused.response.status).toBe(401);
      expect(refused.error?.error.code).toBe('unauthorized');

      const ingested = await api.POST('/i/{publicId}', {
        params: { path: { publicId: webhook.publicId } },
        body: { order: 1 },
        headers: { authorization: `Bearer ${webhook.ingestSecret}` },
      });
      expect(ingested.response.status).toBe(202);
      expect(ingested.data).toMatchObject({ eventId: expect.stringMatching(/^evt_/), deliveryId: expect.stringMatching(/^del_/), status: 'queued' });
      // A 2xx of ingest is the accepted event, or (200) Slack's challenge on a slack-pack webhook.
      if (!ingested.data || !('eventId' in ingested.data)) throw new Error('not an accepted event');
      const { eventId, deliveryId } = ingested.data;

      const settled = async (id: string) =>
        waitFor(async () => {
          const { data } = await api.GET('/v1/deliveries/{id}', { params: { path: { id } } });
          return data && ['succeeded', 'failed'].includes(data.status) ? data : null;
        }, 15_000);
      expect(await settled(deliveryId)).toMatchObject({ status: 'succeeded', eventId, webhookId: webhook.id, attempts: 1 });

      // The delivered request is what the document's `webhooks` section says: verifiable with standardwebhooks.
      const first = receiver.received[0];
      expect(first.headers['webhook-id']).toBe(eventId);
      const verified = new Webhook(webhook.signingSecret).verify(first.body.toString('utf8'), {
        'webhook-id': String(first.headers['webhook-id']),
        'webhook-timestamp': String(first.headers['webhook-timestamp']),
        'webhook-signature': String(first.headers['webhook-signature']),
      });
      expect(verified).toEqual({ order: 1 });

      const attempts = await api.GET('/v1/deliveries/{id}/attempts', { params: { path: { id: deliveryId } } });
      expect(attempts.data).toMatchObject({ items: [{ number: 1, outcome: 'succeeded', statusCode: 200 }], nextCursor: null });

      const replay = await api.POST('/v1/deliveries/{id}/replay', { params: { path: { id: deliveryId } } });
      expect(replay.response.status).toBe(202);
      expect(replay.data).toMatchObject({ kind: 'single', sourceDeliveryId: deliveryId, status: 'completed', total: 1, created: 1 });
      const replayId = (replay.data!.filter as { deliveryIds: string[] }).deliveryIds[0];
      expect(await settled(replayId)).toMatchObject({ status: 'succeeded', replayOf: deliveryId });
      expect(receiver.received).toHaveLength(2);
      expect(receiver.received[1].headers['webhook-id']).toBe(eventId);
      expect(receiver.received[1].body.equals(first.body)).toBe(true);

      const listed = await api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id: webhook.id }, query: { limit: 1 } } });
      expect(listed.data?.items).toHaveLength(1);
      expect(listed.data?.nextCursor).toEqual(expect.any(String));
      const next = await api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id: webhook.id }, query: { limit: 1, cursor: listed.data!.nextCursor! } } });
      expect(next.data?.items.map((d) => d.id)).toEqual([deliveryId]);

      const paused = await api.POST('/v1/webhooks/{id}/pause', { params: { path: { id: webhook.id } } });
      expect(paused.data?.status).toBe('paused');
      const again = await api.POST('/v1/webhooks/{id}/pause', { params: { path: { id: webhook.id } } });
      expect(again.response.status).toBe(409);
      expect(again.error?.error.code).toBe('invalid_state');
    } finally {
      await receiver.close();
    }
  });
});
