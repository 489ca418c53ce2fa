import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
let key: string;
const contacts: any[] = []; // oldest first
const messages: any[] = []; // oldest first, all in contacts[0]'s conversation except the last two
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey: key } = await app.project('free'));
  for (let i = 0; i < 13; i++) contacts.push((await app.api(key, 'POST', '/v1/contacts', { username: `u${i}`, phone_number: `${i}` })).body);
  for (let i = 0; i < 25; i++) {
    const conversation_id = i < 23 ? contacts[0].conversation_id : contacts[1].conversation_id;
    messages.push((await app.api(key, 'POST', '/v1/messages', { conversation_id, message: `m${i}` })).body);
  }
});
afterAll(async () => {
  await app?.stop();
});

const ids = (page: any) => page.data.map((x: any) => x.id);
const newestFirst = (rows: any[]) => rows.map((r) => r.id).reverse();

describe('list pages', () => {
  it('lists newest first, 10 by default, and walks forward with starting_after and back with ending_before', async () => {
    const all = newestFirst(messages);
    const p1 = (await app.api(key, 'GET', '/v1/messages')).body;
    expect(p1.has_more).toBe(true);
    expect(ids(p1)).toEqual(all.slice(0, 10));
    const p2 = (await app.api(key, 'GET', `/v1/messages?starting_after=${p1.data[9].id}`)).body;
    expect(ids(p2)).toEqual(all.slice(10, 20));
    expect(p2.has_more).toBe(true);
    const p3 = (await app.api(key, 'GET', `/v1/messages?starting_after=${p2.data[9].id}`)).body;
    expect(ids(p3)).toEqual(all.slice(20));
    expect(p3.has_more).toBe(false);

    const back2 = (await app.api(key, 'GET', `/v1/messages?ending_before=${p3.data[0].id}`)).body;
    expect(ids(back2)).toEqual(all.slice(10, 20));
    expect(back2.has_more).toBe(true);
    const back1 = (await app.api(key, 'GET', `/v1/messages?ending_before=${back2.data[0].id}`)).body;
    expect(ids(back1)).toEqual(all.slice(0, 10));
    expect(back1.has_more).toBe(false);
    const partial = (await app.api(key, 'GET', `/v1/messages?ending_before=${all[3]}&limit=10`)).body;
    expect(ids(partial)).toEqual(all.slice(0, 3));
    expect(partial.has_more).toBe(false);
  });

  it('filters messages by conversation', async () => {
    const page = (await app.api(key, 'GET', `/v1/messages?conversation_id=${contacts[1].conversation_id}`)).body;
    expect(page).toMatchObject({ has_more: false });
    expect(ids(page)).toEqual(newestFirst(messages.slice(23)));
    const first = (await app.api(key, 'GET', `/v1/messages?conversation_id=${contacts[0].conversation_id}&limit=20`)).body;
    expect(ids(first)).toEqual(newestFirst(messages.slice(0, 23)).slice(0, 20));
    expect(first.has_more).toBe(true);
  });

  it('clamps limit to 1..100 and refuses a non-integer with 400 invalid_limit', async () => {
    expect((await app.api(key, 'GET', '/v1/messages?limit=3')).body.data).toHaveLength(3);
    expect((await app.api(key, 'GET', '/v1/messages?limit=0')).body.data).toHaveLength(1);
    expect((await app.api(key, 'GET', '/v1/messages?limit=-4')).body.data).toHaveLength(1);
    const big = (await app.api(key, 'GET', '/v1/messages?limit=1000')).body;
    expect(big.data).toHaveLength(25);
    expect(big.has_more).toBe(false);
    expect((await app.api(key, 'GET', '/v1/contacts?limit=99999999999999')).body.data).toHaveLength(13);
    for (const bad of ['abc', '2.5', '1e2']) {
      const res = await app.api(key, 'GET', `/v1/contacts?limit=${bad}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_limit', param: 'limit' });
    }
  });

  it('refuses an unknown, foreign or wrong-kind cursor id with 400 naming the parameter', async () => {
    const { apiKey: other } = await app.project('free', 'other');
    const foreignContact = (await app.api(other, 'POST', '/v1/contacts', { username: 'x', phone_number: '1' })).body;
    const cases: Array<[string, string]> = [
      ['/v1/messages?starting_after=msg_nope', 'starting_after'],
      ['/v1/messages?ending_before=msg_nope', 'ending_before'],
      [`/v1/messages?starting_after=${contacts[0].id}`, 'starting_after'],
      [`/v1/contacts?ending_before=${foreignContact.id}`, 'ending_before'],
      [`/v1/contacts?starting_after=${messages[0].id}`, 'starting_after'],
    ];
    for (const [path, param] of cases) {
      const res = await app.api(key, 'GET', path);
      expect(res.status, path).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    }
  });

  it('pages contacts both ways and filters them on activity', async () => {
    const all = newestFirst(contacts);
    const p1 = (await app.api(key, 'GET', '/v1/contacts?limit=5')).body;
    expect(ids(p1)).toEqual(all.slice(0, 5));
    const p2 = (await app.api(key, 'GET', `/v1/contacts?limit=5&starting_after=${p1.data[4].id}`)).body;
    expect(ids(p2)).toEqual(all.slice(5, 10));
    const back = (await app.api(key, 'GET', `/v1/contacts?limit=5&ending_before=${p2.data[0].id}`)).body;
    expect(ids(back)).toEqual(all.slice(0, 5));
    expect(back.has_more).toBe(false);

    const active = (await app.api(key, 'GET', '/v1/contacts?active=true')).body;
    expect(ids(active)).toEqual([contacts[1].id, contacts[0].id]);
    expect(active.data.every((c: any) => Number.isInteger(c.last_active_at))).toBe(true);
    const inactive = (await app.api(key, 'GET', '/v1/contacts?active=false&limit=100')).body;
    expect(ids(inactive)).toEqual(all.filter((id) => id !== contacts[0].id && id !== contacts[1].id));
    expect(inactive.data.every((c: any) => c.last_active_at === null)).toBe(true);
    const inactivePage = (await app.api(key, 'GET', `/v1/contacts?active=false&limit=2&starting_after=${inactive.data[1].id}`)).body;
    expect(ids(inactivePage)).toEqual(ids(inactive).slice(2, 4));
    const bad = await app.api(key, 'GET', '/v1/contacts?active=maybe');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'active' });
  });
});
