import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createOutboundClient } from '../src/outbound/http-client.ts';

// The outbound client (deliveries, drains, alerts) keeps what node:http's client did for callers.
let server: http.Server;
let base: string;
const seen: http.IncomingHttpHeaders[] = [];
const client = createOutboundClient({ allowPrivate: true });

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push(req.headers);
      // Repeated headers, as a receiver may send them.
      res.writeHead(503, [
        ['Retry-After', '7'],
        ['Retry-After', '9'],
        ['X-Note', 'a'],
        ['X-Note', 'b'],
        ['Set-Cookie', 'one=1'],
      ]);
      res.end('busy');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  client.close();
  await new Promise((r) => server.close(r));
});

it("sends a URL's user and password as Basic authorization, the body's own length, and no Expect header", async () => {
  const body = Buffer.from('{"a":1}');
  const res = await client.send({ url: `http://us%40er:p%3Ass@${base}/hook?x=1`, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '999', Expect: '100-continue' }, body, timeoutMs: 10_000 });
  expect(res.statusCode).toBe(503);
  const got = seen.at(-1)!;
  expect(got.authorization).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
  expect(got['content-length']).toBe(String(body.length));
  expect(got.expect).toBeUndefined();
  // A header the caller set wins over the URL's credentials.
  await client.send({ url: `http://u:p@${base}/hook`, method: 'POST', headers: { authorization: 'Bearer t' }, body, timeoutMs: 10_000 });
  expect(seen.at(-1)!.authorization).toBe('Bearer t');
});

it('answers repeated response headers as node:http did: the first Retry-After, others joined, set-cookie a list; the body as its snippet', async () => {
  const res = await client.send({ url: `http://${base}/hook`, method: 'POST', headers: {}, body: Buffer.from('{}'), timeoutMs: 10_000 });
  expect(res).toMatchObject({ statusCode: 503, snippet: 'busy' });
  expect(res.headers).toMatchObject({ 'retry-after': '7', 'x-note': 'a, b', 'set-cookie': ['one=1'] });
});
