import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey: key } = await app.project('free'));
});
afterAll(async () => {
  await app?.stop();
});

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const CONTACT_KEYS = ['avatar_url', 'conversation_id', 'created_at', 'display_name', 'id', 'last_active_at', 'phone_number', 'username'];

describe('contacts over REST', () => {
  it('creates a contact with its conversation, in the spec shape with Unix-second timestamps', async () => {
    const before = Math.floor(Date.now() / 1000);
    const res = await app.api(key, 'POST', '/v1/contacts', { username: 'ana', phone_number: '+15550001', avatar_url: 'https://img.test/ana.png' });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(CONTACT_KEYS);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^ct_/),
      username: 'ana',
      phone_number: '+15550001',
      avatar_url: 'https://img.test/ana.png',
      display_name: null,
      conversation_id: expect.stringMatching(/^conv_/),
      last_active_at: null,
    });
    expect(Number.isInteger(res.body.created_at)).toBe(true);
    expect(res.body.created_at).toBeGreaterThanOrEqual(before);
    expect(res.body.created_at).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    const conversations = await app.rt.db.prisma.conversation.findMany({ where: { contactId: res.body.id } });
    expect(conversations.map((c) => c.id)).toEqual([res.body.conversation_id]);

    const got = await app.api(key, 'GET', `/v1/contacts/${res.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it('accepts form-encoded bodies with the same meaning as JSON', async () => {
    const res = await app.api(key, 'POST', '/v1/contacts', 'username=bo&phone_number=%2B15550002&display_name=Bo%20B', FORM);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ username: 'bo', phone_number: '+15550002', display_name: 'Bo B', avatar_url: null });
  });

  it('updates display_name only; null clears it', async () => {
    const created = (await app.api(key, 'POST', '/v1/contacts', { username: 'cy', phone_number: '3' })).body;
    const renamed = await app.api(key, 'PUT', `/v1/contacts/${created.id}`, 'display_name=Cy%20C', FORM);
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...created, display_name: 'Cy C' });

    const other = await app.api(key, 'PUT', `/v1/contacts/${created.id}`, { username: 'mallory' });
    expect(other.status).toBe(400);
    expect(other.body.error).toMatchObject({ code: 'invalid_request', param: 'username' });

    const cleared = await app.api(key, 'PUT', `/v1/contacts/${created.id}`, { display_name: null });
    expect(cleared.body.display_name).toBeNull();
    expect(cleared.body.username).toBe('cy');
  });

  it('deletes a contact with its conversation and messages', async () => {
    const contact = (await app.api(key, 'POST', '/v1/contacts', { username: 'dee', phone_number: '4' })).body;
    const message = (await app.api(key, 'POST', '/v1/messages', { conversation_id: contact.conversation_id, message: 'bye' })).body;
    const res = await app.api(key, 'DELETE', `/v1/contacts/${contact.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: contact.id, deleted: true });
    expect((await app.api(key, 'GET', `/v1/contacts/${contact.id}`)).status).toBe(404);
    expect((await app.api(key, 'GET', `/v1/messages/${message.id}`)).status).toBe(404);
    expect(await app.rt.db.prisma.conversation.count({ where: { id: contact.conversation_id } })).toBe(0);
    const listed = await app.api(key, 'GET', `/v1/messages?conversation_id=${contact.conversation_id}`);
    expect(listed.body).toEqual({ has_more: false, data: [] });
    const again = await app.api(key, 'DELETE', `/v1/contacts/${contact.id}`);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('not_found');
  });

  it('refuses missing or mistyped fields with 400 invalid_request naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ phone_number: '1' }, 'username'],
      [{ username: 'x' }, 'phone_number'],
      [{ username: 5, phone_number: '1' }, 'username'],
      [{ username: 'x', phone_number: ['1'] }, 'phone_number'],
      [{ username: 'x', phone_number: '1', avatar_url: 'not a url' }, 'avatar_url'],
      [{ username: 'x', phone_number: '1', avatar_url: 'ftp://host/a.png' }, 'avatar_url'],
      [{ username: 'x\u0000y', phone_number: '1' }, 'username'],
      [{ username: 'x', phone_number: '1', nickname: 'y' }, 'nickname'],
    ];
    for (const [body, param] of cases) {
      const res = await app.api(key, 'POST', '/v1/contacts', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    }
    const form = await app.api(key, 'POST', '/v1/contacts', 'username=x', FORM);
    expect(form.body.error).toMatchObject({ code: 'invalid_request', param: 'phone_number' });
  });

  it('documents the conversation routes in the OpenAPI document', async () => {
    const doc = (await app.api(null, 'GET', '/v1/openapi.json')).body;
    expect(Object.keys(doc.paths['/v1/contacts']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/contacts/{id}']).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(doc.paths['/v1/messages']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/messages/{id}']).sort()).toEqual(['delete', 'get', 'put']);
    expect(doc.components.schemas.Contact.properties.created_at).toMatchObject({ type: 'integer' });
  });

  it("answers 404 for another project's contact, on every route", async () => {
    const mine = (await app.api(key, 'POST', '/v1/contacts', { username: 'eve', phone_number: '5' })).body;
    const { apiKey: otherKey } = await app.project('free', 'other');
    for (const [method, body] of [['GET'], ['PUT', { display_name: 'x' }], ['DELETE']] as const) {
      const res = await app.api(otherKey, method, `/v1/contacts/${mine.id}`, body);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    expect((await app.api(otherKey, 'GET', '/v1/contacts')).body.data).toEqual([]);
    expect((await app.api(key, 'GET', `/v1/contacts/${mine.id}`)).body.display_name).toBeNull();
    expect((await app.api(key, 'GET', '/v1/contacts/ct_unknown')).status).toBe(404);
  });
});
