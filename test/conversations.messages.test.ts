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
const MESSAGE_KEYS = ['attachments', 'contact', 'conversation_id', 'created_at', 'id', 'message', 'reactions', 'read_at', 'updated_at'];
const EMBEDDED_CONTACT_KEYS = ['avatar_url', 'created_at', 'id', 'last_active_at', 'phone_number', 'username'];

async function newContact(apiKey = key, username = 'ana') {
  const res = await app.api(apiKey, 'POST', '/v1/contacts', { username, phone_number: '+15550100', avatar_url: 'https://img.test/a.png' });
  expect(res.status).toBe(200);
  return res.body;
}

async function send(conversationId: string, message = 'hello', extra: Record<string, unknown> = {}) {
  const res = await app.api(key, 'POST', '/v1/messages', { conversation_id: conversationId, message, ...extra });
  expect(res.status).toBe(200);
  return res.body;
}

describe('sending messages', () => {
  it("answers the spec shape, embeds the conversation's contact and moves its last_active_at to the message's created_at", async () => {
    const contact = await newContact();
    const before = Math.floor(Date.now() / 1000);
    const res = await app.api(key, 'POST', '/v1/messages', {
      conversation_id: contact.conversation_id,
      message: 'hello',
      attachments: [{ url: 'https://files.test/a.pdf', type: 'application/pdf', name: 'a.pdf', size: 1234 }],
    });
    expect(res.status).toBe(200);
    const m = res.body;
    expect(Object.keys(m).sort()).toEqual(MESSAGE_KEYS);
    expect(Object.keys(m.contact).sort()).toEqual(EMBEDDED_CONTACT_KEYS);
    expect(m).toMatchObject({
      id: expect.stringMatching(/^msg_/),
      conversation_id: contact.conversation_id,
      message: 'hello',
      reactions: [],
      attachments: [{ url: 'https://files.test/a.pdf', type: 'application/pdf', name: 'a.pdf', size: 1234 }],
      read_at: null,
      updated_at: null,
      contact: { id: contact.id, username: 'ana', phone_number: '+15550100', avatar_url: 'https://img.test/a.png', created_at: contact.created_at },
    });
    expect(Number.isInteger(m.created_at)).toBe(true);
    expect(m.created_at).toBeGreaterThanOrEqual(before);
    expect(m.created_at).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    expect(m.contact.last_active_at).toBe(m.created_at);

    const after = (await app.api(key, 'GET', `/v1/contacts/${contact.id}`)).body;
    expect(after.last_active_at).toBe(m.created_at);
    const row = await app.rt.db.prisma.contact.findUniqueOrThrow({ where: { id: contact.id } });
    const stored = await app.rt.db.prisma.message.findUniqueOrThrow({ where: { id: m.id } });
    expect(row.lastActiveAt?.getTime()).toBe(stored.createdAt.getTime());

    expect((await app.api(key, 'GET', `/v1/messages/${m.id}`)).body).toEqual(m);
  });

  it('takes attachments form-encoded, with the same meaning as JSON', async () => {
    const contact = await newContact();
    const body = `conversation_id=${contact.conversation_id}&message=see%20attached&attachments[0][url]=https://files.test/x.png&attachments[0][size]=42&attachments[1][url]=http://files.test/y`;
    const res = await app.api(key, 'POST', '/v1/messages', body, FORM);
    expect(res.status).toBe(200);
    expect(res.body.attachments).toEqual([{ url: 'https://files.test/x.png', size: 42 }, { url: 'http://files.test/y' }]);
  });

  it('refuses bad input with 400 invalid_request naming the field', async () => {
    const { conversation_id } = await newContact();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ message: 'x' }, 'conversation_id'],
      [{ conversation_id }, 'message'],
      [{ conversation_id, message: 7 }, 'message'],
      [{ conversation_id, message: 'x', attachments: 'https://a.test/' }, 'attachments'],
      [{ conversation_id, message: 'x', attachments: { url: 'https://a.test/' } }, 'attachments'],
      [{ conversation_id, message: 'x', attachments: ['https://a.test/'] }, 'attachments[0]'],
      [{ conversation_id, message: 'x', attachments: [{ type: 'image/png' }] }, 'attachments[0].url'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'javascript:alert(1)' }] }, 'attachments[0].url'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'not a url' }] }, 'attachments[0].url'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'https://a.test/', size: 'big' }] }, 'attachments[0].size'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'https://a.test/', size: 1.5 }] }, 'attachments[0].size'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'https://a.test/', name: 3 }] }, 'attachments[0].name'],
      [{ conversation_id, message: 'x', attachments: [{ url: 'https://a.test/', colour: 'red' }] }, 'attachments[0].colour'],
      [{ conversation_id, message: 'a\u0000b' }, 'message'],
      [{ conversation_id, message: 'x', reactions: { like: ['ana'] } }, 'reactions'],
    ];
    for (const [body, param] of cases) {
      const res = await app.api(key, 'POST', '/v1/messages', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error, JSON.stringify(body)).toMatchObject({ code: 'invalid_request', param });
    }
    const unknown = await app.api(key, 'POST', '/v1/messages', { conversation_id: 'conv_nope', message: 'x' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
  });
});

describe('updating messages', () => {
  it('adds form-encoded reactions without duplicates, in order of first use, and sets updated_at', async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id);
    const first = await app.api(key, 'PUT', `/v1/messages/${m.id}`, 'reactions[like][]=ana&reactions[like][]=bo&reactions[heart][]=cy', FORM);
    expect(first.status).toBe(200);
    expect(first.body.reactions).toEqual([{ like: ['ana', 'bo'] }, { heart: ['cy'] }]);
    expect(Number.isInteger(first.body.updated_at)).toBe(true);
    expect(first.body.message).toBe('hello');

    const second = await app.api(key, 'PUT', `/v1/messages/${m.id}`, 'reactions[heart][]=ana&reactions[like][]=bo&reactions[wow][]=dee', FORM);
    expect(second.body.reactions).toEqual([{ like: ['ana', 'bo'] }, { heart: ['cy', 'ana'] }, { wow: ['dee'] }]);

    // JSON means the same; the answer's own array shape is accepted too
    const json = await app.api(key, 'PUT', `/v1/messages/${m.id}`, { reactions: { like: ['cy', 'ana'] } });
    expect(json.body.reactions).toEqual([{ like: ['ana', 'bo', 'cy'] }, { heart: ['cy', 'ana'] }, { wow: ['dee'] }]);
    const arrayShape = await app.api(key, 'PUT', `/v1/messages/${m.id}`, { reactions: [{ fire: ['ed'] }, { like: ['ed'] }] });
    expect(arrayShape.body.reactions).toEqual([{ like: ['ana', 'bo', 'cy', 'ed'] }, { heart: ['cy', 'ana'] }, { wow: ['dee'] }, { fire: ['ed'] }]);
    expect((await app.api(key, 'GET', `/v1/messages/${m.id}`)).body.reactions).toEqual(arrayShape.body.reactions);
  });

  it('replaces the text and appends attachments; a request that changes nothing leaves updated_at alone', async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id, 'first', { attachments: [{ url: 'https://files.test/1' }] });
    const same = await app.api(key, 'PUT', `/v1/messages/${m.id}`, {});
    expect(same.status).toBe(200);
    expect(same.body).toEqual(m);

    const edited = await app.api(
      key,
      'PUT',
      `/v1/messages/${m.id}`,
      'message=second&attachments[0][url]=https://files.test/2&attachments[0][type]=image/png',
      FORM,
    );
    expect(edited.body.message).toBe('second');
    expect(edited.body.attachments).toEqual([{ url: 'https://files.test/1' }, { url: 'https://files.test/2', type: 'image/png' }]);
    expect(edited.body.updated_at).toBeGreaterThanOrEqual(m.created_at);
    expect(edited.body.created_at).toBe(m.created_at);

    const dup = await app.api(key, 'PUT', `/v1/messages/${m.id}`, { reactions: { like: ['ana'] } });
    await app.rt.db.prisma.message.update({ where: { id: m.id }, data: { updatedAt: new Date(0) } });
    const again = await app.api(key, 'PUT', `/v1/messages/${m.id}`, { reactions: { like: ['ana'] }, message: 'second' });
    expect(again.body.updated_at).toBe(0);
    expect(again.body.reactions).toEqual(dup.body.reactions);
  });

  it('keeps every reaction when updates race', async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id);
    const people = Array.from({ length: 8 }, (_, i) => `p${i}`);
    await Promise.all(people.map((p) => app.api(key, 'PUT', `/v1/messages/${m.id}`, { reactions: { like: [p] } })));
    const after = (await app.api(key, 'GET', `/v1/messages/${m.id}`)).body;
    expect([...after.reactions[0].like].sort()).toEqual(people);
  });

  it('refuses malformed updates with 400 naming the field', async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id);
    const cases: Array<[unknown, string]> = [
      [{ reactions: 'like' }, 'reactions'],
      [{ reactions: { like: [] } }, 'reactions[like]'],
      [{ reactions: { like: [5] } }, 'reactions[like][0]'],
      [{ reactions: { like: { who: 'ana' } } }, 'reactions[like]'],
      [{ attachments: [{ url: 'ftp://files.test/x' }] }, 'attachments[0].url'],
      [{ message: 5 }, 'message'],
      [{ message: null }, 'message'],
      [{ conversation_id }, 'conversation_id'],
    ];
    for (const [body, param] of cases) {
      const res = await app.api(key, 'PUT', `/v1/messages/${m.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error, JSON.stringify(body)).toMatchObject({ code: 'invalid_request', param });
    }
    const form = await app.api(key, 'PUT', `/v1/messages/${m.id}`, 'reactions[like][]=', FORM);
    expect(form.body.error).toMatchObject({ code: 'invalid_request', param: 'reactions[like][0]' });
    expect((await app.api(key, 'GET', `/v1/messages/${m.id}`)).body).toEqual(m);
  });
});

describe('deleting and isolation', () => {
  it('deletes a message permanently', async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id);
    const res = await app.api(key, 'DELETE', `/v1/messages/${m.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: m.id, deleted: true });
    expect((await app.api(key, 'GET', `/v1/messages/${m.id}`)).status).toBe(404);
    expect((await app.api(key, 'DELETE', `/v1/messages/${m.id}`)).status).toBe(404);
    expect((await app.api(key, 'PUT', `/v1/messages/${m.id}`, { message: 'x' })).status).toBe(404);
  });

  it("answers 404 for another project's messages and conversations", async () => {
    const { conversation_id } = await newContact();
    const m = await send(conversation_id);
    const { apiKey: other } = await app.project('free', 'other');
    for (const [method, body] of [['GET'], ['PUT', { message: 'hijack' }], ['DELETE']] as const) {
      const res = await app.api(other, method, `/v1/messages/${m.id}`, body);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    const foreign = await app.api(other, 'POST', '/v1/messages', { conversation_id, message: 'x' });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('not_found');
    expect((await app.api(other, 'GET', '/v1/messages')).body).toEqual({ has_more: false, data: [] });
    expect((await app.api(other, 'GET', `/v1/messages?conversation_id=${conversation_id}`)).body.data).toEqual([]);
    expect((await app.api(key, 'GET', `/v1/messages/${m.id}`)).body).toEqual(m);
  });
});
