import dns from 'node:dns';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDestinationSenders, type DestinationSend } from '../src/destinations/senders/index.ts';
import { sqsMessage } from '../src/destinations/senders/sqs.ts';
import { encryptSecret } from '../src/encryption.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { putEventsAnswer, sendMessageAnswer, sqsError, startAwsJsonServer, type AwsJsonCall } from './support/aws-json-server.ts';
import { startPubSubServer } from './support/pubsub-server.ts';
import { createWebhook, ingest } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

const aws = { accessKeyId: 'AKIDCLOUDTEST', secretAccessKey: 'cloud-test-secret' };
const serviceAccount = { client_email: 'relay@proj.iam.gserviceaccount.com', private_key: '-----BEGIN PRIVATE KEY-----\nnot-used-by-the-emulator\n-----END PRIVATE KEY-----\n' };
const fastRetries = { maxAttempts: 4, initialDelayMs: 100, backoff: 'fixed', jitter: false };

async function delivery(apiKey: string, id: string) {
  return (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
}
async function settled(apiKey: string, id: string) {
  return waitFor(async () => {
    const d = await delivery(apiKey, id);
    return ['succeeded', 'failed'].includes(d.status) ? d : null;
  }, 15_000);
}
async function attempts(apiKey: string, id: string) {
  return (await app.api(apiKey, 'GET', `/v1/deliveries/${id}/attempts`)).body.items as any[];
}
async function dlqDeliveryIds(apiKey: string) {
  return (await app.api(apiKey, 'GET', '/v1/dlq')).body.items.map((e: any) => e.deliveryId) as string[];
}
async function replay(apiKey: string, deliveryId: string) {
  const res = await app.api(apiKey, 'POST', `/v1/deliveries/${deliveryId}/replay`);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.filter.deliveryIds[0] as string;
}
/** A Pro webhook whose default destination is `destination`. */
async function typedWebhook(destination: { type: string; config: Record<string, unknown> }, controls: Record<string, unknown> = {}) {
  const { apiKey } = await app.project('pro');
  const wh = await createWebhook(app, apiKey, { url: undefined, destination: { name: 'cloud', ...destination }, ...controls });
  const send = async (body: string | Buffer, contentType = 'application/json') => {
    const res = await ingest(app, wh.publicId, { body, headers: { 'x-webhook-secret': wh.ingestSecret, 'content-type': contentType } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return res.body as { eventId: string; deliveryId: string };
  };
  return { apiKey, wh, send };
}
/** The Standard Webhooks headers of an SQS message or a Pub/Sub message, as a receiver would read them. */
function signingOf(attrs: Record<string, string>) {
  return { 'webhook-id': attrs['webhook-id'], 'webhook-timestamp': attrs['webhook-timestamp'], 'webhook-signature': attrs['webhook-signature'] };
}
const sqsAttrs = (call: AwsJsonCall) =>
  Object.fromEntries(Object.entries(call.input.MessageAttributes ?? {}).map(([k, v]: [string, any]) => [k, v.StringValue as string]));

describe('object storage destinations', () => {
  let s3: S3rver;
  let endpoint: string;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 's3rver-'));
    s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: 'events' }] });
    endpoint = `http://127.0.0.1:${(await s3.run()).port}`;
  });
  afterAll(async () => {
    s3.httpServer.closeAllConnections();
    await s3.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const s3Credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

  async function readObject(key: string) {
    // A copy: the SDK marks the credentials object it is given.
    const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: { ...s3Credentials } });
    try {
      const out = await client.send(new GetObjectCommand({ Bucket: 'events', Key: key }));
      return { bytes: Buffer.from(await out.Body!.transformToByteArray()), contentType: out.ContentType, metadata: out.Metadata ?? {} };
    } finally {
      client.destroy();
    }
  }

  it('puts the bytes under prefix/webhook/event/delivery with the content type and the signature as metadata; replay writes the same bytes again', async () => {
    const { apiKey, wh, send } = await typedWebhook({
      type: 'object_storage',
      config: { bucket: 'events', endpoint, region: 'us-east-1', forcePathStyle: true, prefix: 'inbound/', credentials: s3Credentials },
    });
    const payload = '{"order": 7, "note": "héllo"}';
    const { eventId, deliveryId } = await send(payload);
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ status: 'succeeded', attempts: 1, destination: { type: 'object_storage' } });
    expect(JSON.stringify(d)).not.toContain('S3RVER');
    const [attempt] = await attempts(apiKey, deliveryId);
    expect(attempt).toMatchObject({ number: 1, statusCode: 200, outcome: 'succeeded' });
    const key = `inbound/${wh.id}/${eventId}/${deliveryId}.json`;
    expect(attempt.responseSnippet).toContain(`Key=${key}`);

    const stored = await readObject(key);
    expect(stored.bytes.toString('utf8')).toBe(payload);
    expect(stored.contentType).toBe('application/json');
    expect(stored.metadata['webhook-id']).toBe(eventId);
    expect(new Webhook(wh.signingSecret).verify(stored.bytes.toString('utf8'), signingOf(stored.metadata))).toEqual(JSON.parse(payload));

    const replayId = await replay(apiKey, deliveryId);
    expect(await settled(apiKey, replayId)).toMatchObject({ status: 'succeeded', replayOf: deliveryId });
    const again = await readObject(`inbound/${wh.id}/${eventId}/${replayId}.json`);
    expect(again.bytes.equals(stored.bytes)).toBe(true);
    expect(again.metadata['webhook-id']).toBe(eventId);
  });

  it('fails terminally when the bucket does not exist, into the DLQ', async () => {
    const { apiKey, send } = await typedWebhook(
      { type: 'object_storage', config: { bucket: 'no-such-bucket', endpoint, forcePathStyle: true, credentials: s3Credentials } },
      { retryPolicy: fastRetries },
    );
    const { deliveryId } = await send('{"a":1}');
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ status: 'failed', attempts: 1, lastAttempt: { statusCode: 404 } });
    expect(d.lastAttempt.error).toMatch(/^S3 PutObject: NoSuchBucket/);
    expect(await dlqDeliveryIds(apiKey)).toEqual([deliveryId]);
  });
});

describe('SQS destinations', () => {
  let sqs: Awaited<ReturnType<typeof startAwsJsonServer>>;
  const perQueue = new Map<string, number>();
  beforeAll(async () => {
    sqs = await startAwsJsonServer((call) => {
      const queue = new URL(call.input.QueueUrl).pathname;
      const n = (perQueue.get(queue) ?? 0) + 1;
      perQueue.set(queue, n);
      if (queue.endsWith('/missing')) return sqsError(400, 'QueueDoesNotExist', 'AWS.SimpleQueueService.NonExistentQueue', 'The specified queue does not exist.');
      if (queue.endsWith('/flaky') && n === 1) return sqsError(400, 'ThrottlingException', 'ThrottlingException', 'Rate exceeded');
      if (queue.endsWith('/flaky') && n === 2) return sqsError(500, 'InternalError', 'InternalError', 'We encountered an internal error.');
      return sendMessageAnswer(call);
    });
  });
  afterAll(() => sqs.close());
  const calls = (queue: string) => sqs.calls.filter((c) => c.input.QueueUrl.endsWith(queue));
  const sqsConfig = (queue: string) => ({ queueUrl: `${sqs.url}/000000000000/${queue}`, region: 'eu-west-1', credentials: aws });

  it('sends the body with the signature as message attributes, signed with the destination credentials; replay re-sends it', async () => {
    const { apiKey, wh, send } = await typedWebhook({ type: 'aws_sqs', config: sqsConfig('events') });
    const payload = '{"id":1,"text":"héllo"}';
    const { eventId, deliveryId } = await send(payload);
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ status: 'succeeded', attempts: 1, lastAttempt: { statusCode: 200, error: null } });
    const [attempt] = await attempts(apiKey, deliveryId);
    expect(attempt).toMatchObject({ statusCode: 200, outcome: 'succeeded', responseSnippet: expect.stringMatching(/^MessageId=/) });

    const [call] = calls('/events');
    expect(call.target).toBe('AmazonSQS.SendMessage');
    expect(call.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDCLOUDTEST\/\d{8}\/eu-west-1\/sqs\//);
    expect(call.input.MessageBody).toBe(payload);
    expect(call.input).not.toHaveProperty('MessageGroupId');
    const attrs = sqsAttrs(call);
    expect(attrs).toMatchObject({ 'webhook-id': eventId, 'content-type': 'application/json' });
    expect(new Webhook(wh.signingSecret).verify(call.input.MessageBody, signingOf(attrs))).toEqual(JSON.parse(payload));

    const replayId = await replay(apiKey, deliveryId);
    expect(await settled(apiKey, replayId)).toMatchObject({ status: 'succeeded', replayOf: deliveryId });
    const [, again] = calls('/events');
    expect(again.input.MessageBody).toBe(payload);
    expect(sqsAttrs(again)['webhook-id']).toBe(eventId);
  });

  it('routes to a FIFO queue (webhook as group, delivery as deduplication id) and base64-encodes bytes that are not text', async () => {
    const { apiKey, wh, send } = await typedWebhook({ type: 'aws_sqs', config: sqsConfig('default') });
    const added = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destinations`, { name: 'orders', type: 'aws_sqs', config: sqsConfig('orders.fifo') });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    const routing = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/routing`, {
      rules: [{ name: 'orders', priority: 1, match: { $or: [{ 'body.kind': 'order' }, { contentType: 'application/octet-stream' }] }, destinationId: added.body.id }],
    });
    expect(routing.status, JSON.stringify(routing.body)).toBe(200);

    const order = await send('{"kind":"order","n":1}');
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x41, 0x0a]);
    const binary = await send(bytes, 'application/octet-stream');
    const other = await send('{"kind":"refund"}');
    for (const id of [order.deliveryId, binary.deliveryId, other.deliveryId]) expect((await settled(apiKey, id)).status).toBe('succeeded');

    const fifo = calls('/orders.fifo');
    expect(fifo).toHaveLength(2);
    const byEvent = new Map(fifo.map((c) => [sqsAttrs(c)['webhook-id'], c]));
    const orderCall = byEvent.get(order.eventId)!;
    expect(orderCall.input).toMatchObject({ MessageBody: '{"kind":"order","n":1}', MessageGroupId: wh.id, MessageDeduplicationId: order.deliveryId });
    const binaryCall = byEvent.get(binary.eventId)!;
    expect(binaryCall.input).toMatchObject({ MessageGroupId: wh.id, MessageDeduplicationId: binary.deliveryId });
    expect(sqsAttrs(binaryCall)).toMatchObject({ 'content-transfer-encoding': 'base64', 'content-type': 'application/octet-stream' });
    expect(Buffer.from(binaryCall.input.MessageBody, 'base64').equals(bytes)).toBe(true);
    expect(calls('/default').map((c) => c.input.MessageBody)).toEqual(['{"kind":"refund"}']);
  });

  it('retries throttling and 5xx answers, then succeeds', async () => {
    const { apiKey, send } = await typedWebhook({ type: 'aws_sqs', config: sqsConfig('flaky') }, { retryPolicy: fastRetries });
    const { deliveryId } = await send('{"retry":true}');
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ status: 'succeeded', attempts: 3 });
    const list = await attempts(apiKey, deliveryId);
    expect(list.map((a) => [a.statusCode, a.outcome])).toEqual([
      [429, 'retry'],
      [500, 'retry'],
      [200, 'succeeded'],
    ]);
    expect(list[0].error).toMatch(/^SQS SendMessage: ThrottlingException: Rate exceeded \(HTTP 400, recorded as 429\)/);
    expect(list[1].error).toMatch(/^SQS SendMessage: InternalError/);
    expect(new Set(calls('/flaky').map((c) => c.input.MessageBody))).toEqual(new Set(['{"retry":true}']));
  });

  it('fails terminally on a queue that does not exist, into the DLQ', async () => {
    const { apiKey, send } = await typedWebhook({ type: 'aws_sqs', config: sqsConfig('missing') }, { retryPolicy: fastRetries });
    const { deliveryId } = await send('{"a":1}');
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ status: 'failed', attempts: 1, lastAttempt: { statusCode: 400 } });
    expect(d.lastAttempt.error).toBe('SQS SendMessage: AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (HTTP 400)');
    expect(await dlqDeliveryIds(apiKey)).toEqual([deliveryId]);
  });
});

describe('EventBridge destinations', () => {
  let eb: Awaited<ReturnType<typeof startAwsJsonServer>>;
  const perSource = new Map<string, number>();
  beforeAll(async () => {
    eb = await startAwsJsonServer((call) => {
      const source = call.input.Entries[0].Source as string;
      const n = (perSource.get(source) ?? 0) + 1;
      perSource.set(source, n);
      if (source === 'relay.forbidden') return putEventsAnswer(call, 'NotAuthorizedForSourceException');
      if (source === 'relay.flaky' && n === 1) return putEventsAnswer(call, 'ThrottlingException');
      if (source === 'relay.flaky' && n === 2) return { status: 503, body: { __type: 'ServiceUnavailableException', message: 'try later' } };
      return putEventsAnswer(call);
    });
  });
  afterAll(() => eb.close());
  const ebConfig = (source: string) => ({ eventBusName: 'orders-bus', region: 'us-east-2', source, detailType: 'webhook.received', endpoint: eb.url, credentials: aws });
  const entries = (source: string) => eb.calls.filter((c) => c.input.Entries[0].Source === source).map((c) => c.input.Entries[0]);

  it('puts a JSON object body as the detail, wraps other bodies in base64, on the configured bus', async () => {
    const { apiKey, send } = await typedWebhook({ type: 'aws_eventbridge', config: ebConfig('relay.events') });
    const json = await send('{"order":42,"items":[1,2]}');
    const text = await send('plain text, not JSON', 'text/plain');
    for (const id of [json.deliveryId, text.deliveryId]) expect(await settled(apiKey, id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    const [attempt] = await attempts(apiKey, json.deliveryId);
    expect(attempt).toMatchObject({ statusCode: 200, outcome: 'succeeded', responseSnippet: expect.stringMatching(/^EventId=/) });

    const calls = eb.calls.filter((c) => c.input.Entries[0].Source === 'relay.events');
    expect(calls[0].target).toBe('AWSEvents.PutEvents');
    expect(calls[0].headers.authorization).toMatch(/Credential=AKIDCLOUDTEST\/\d{8}\/us-east-2\/events\//);
    const sent = entries('relay.events');
    expect(sent.map((e) => [e.EventBusName, e.DetailType])).toEqual([
      ['orders-bus', 'webhook.received'],
      ['orders-bus', 'webhook.received'],
    ]);
    const details = sent.map((e) => JSON.parse(e.Detail));
    expect(details).toContainEqual({ order: 42, items: [1, 2] });
    expect(details).toContainEqual({ data: Buffer.from('plain text, not JSON').toString('base64'), contentType: 'text/plain' });
    expect(Math.abs(sent[0].Time - Date.now() / 1000)).toBeLessThan(60);
  });

  it('retries a throttled entry and a 503, then succeeds; a refused entry fails terminally into the DLQ', async () => {
    const flaky = await typedWebhook({ type: 'aws_eventbridge', config: ebConfig('relay.flaky') }, { retryPolicy: fastRetries });
    const forbidden = await typedWebhook({ type: 'aws_eventbridge', config: ebConfig('relay.forbidden') }, { retryPolicy: fastRetries });
    const a = await flaky.send('{"a":1}');
    const b = await forbidden.send('{"b":2}');
    expect(await settled(flaky.apiKey, a.deliveryId)).toMatchObject({ status: 'succeeded', attempts: 3 });
    const list = await attempts(flaky.apiKey, a.deliveryId);
    expect(list.map((x) => [x.statusCode, x.outcome])).toEqual([
      [429, 'retry'],
      [503, 'retry'],
      [200, 'succeeded'],
    ]);
    expect(list[0].error).toMatch(/^EventBridge PutEvents: entry refused: ThrottlingException/);

    const d = await settled(forbidden.apiKey, b.deliveryId);
    expect(d).toMatchObject({ status: 'failed', attempts: 1, lastAttempt: { statusCode: 400 } });
    expect(d.lastAttempt.error).toMatch(/^EventBridge PutEvents: entry refused: NotAuthorizedForSourceException/);
    expect(await dlqDeliveryIds(forbidden.apiKey)).toEqual([b.deliveryId]);
    expect(entries('relay.forbidden')).toHaveLength(1);
  });
});

describe('Pub/Sub destinations', () => {
  let pubsub: Awaited<ReturnType<typeof startPubSubServer>>;
  const perTopic = new Map<string, number>();
  beforeAll(async () => {
    pubsub = await startPubSubServer((call) => {
      const n = (perTopic.get(call.topic) ?? 0) + 1;
      perTopic.set(call.topic, n);
      if (call.topic.endsWith('/missing')) return { code: 5, details: `Resource not found (resource=${call.topic.split('/').pop()}).` };
      if (call.topic.endsWith('/busy') && n === 1) return { code: 8, details: 'Quota exceeded' };
      return { ok: true };
    });
  });
  afterAll(() => pubsub.close());
  const psConfig = (topic: string) => ({ projectId: 'relay-test', topic, endpoint: pubsub.url, credentials: serviceAccount });
  const messages = (topic: string) => pubsub.calls.filter((c) => c.topic === `projects/relay-test/topics/${topic}`).flatMap((c) => c.messages);

  it('publishes the body bytes with the signature and content type as attributes; replay publishes them again', async () => {
    const { apiKey, wh, send } = await typedWebhook({ type: 'gcp_pubsub', config: psConfig('events') });
    const payload = '{"hello":"pubsub","n":3}';
    const { eventId, deliveryId } = await send(payload);
    expect(await settled(apiKey, deliveryId)).toMatchObject({ status: 'succeeded', attempts: 1, lastAttempt: { statusCode: 200 } });
    const [attempt] = await attempts(apiKey, deliveryId);
    expect(attempt.responseSnippet).toMatch(/^messageId=\d+$/);

    const [message] = messages('events');
    expect(message.data.toString('utf8')).toBe(payload);
    expect(message.attributes).toMatchObject({ 'webhook-id': eventId, 'content-type': 'application/json' });
    expect(new Webhook(wh.signingSecret).verify(message.data.toString('utf8'), signingOf(message.attributes))).toEqual(JSON.parse(payload));

    const replayId = await replay(apiKey, deliveryId);
    expect(await settled(apiKey, replayId)).toMatchObject({ status: 'succeeded', replayOf: deliveryId });
    const [, again] = messages('events');
    expect(again.data.equals(message.data)).toBe(true);
    expect(again.attributes['webhook-id']).toBe(eventId);
  });

  it('retries RESOURCE_EXHAUSTED as 429; NOT_FOUND fails terminally into the DLQ', async () => {
    const busy = await typedWebhook({ type: 'gcp_pubsub', config: psConfig('busy') }, { retryPolicy: fastRetries });
    const missing = await typedWebhook({ type: 'gcp_pubsub', config: psConfig('missing') }, { retryPolicy: fastRetries });
    const a = await busy.send('{"a":1}');
    const b = await missing.send('{"b":2}');
    expect(await settled(busy.apiKey, a.deliveryId)).toMatchObject({ status: 'succeeded', attempts: 2 });
    const list = await attempts(busy.apiKey, a.deliveryId);
    expect(list.map((x) => [x.statusCode, x.outcome])).toEqual([
      [429, 'retry'],
      [200, 'succeeded'],
    ]);
    expect(list[0].error).toMatch(/^Pub\/Sub Publish: RESOURCE_EXHAUSTED: Quota exceeded/);
    const d = await settled(missing.apiKey, b.deliveryId);
    expect(d).toMatchObject({ status: 'failed', attempts: 1, lastAttempt: { statusCode: 404 } });
    expect(d.lastAttempt.error).toMatch(/^Pub\/Sub Publish: NOT_FOUND: Resource not found/);
    expect(await dlqDeliveryIds(missing.apiKey)).toEqual([b.deliveryId]);
  });
});

describe('cloud senders', () => {
  const request = (timeoutMs = 2000): DestinationSend => ({
    dispatch: { body: Buffer.from('{"x":1}'), contentType: 'application/json', headers: {} },
    signing: { 'webhook-id': 'evt_x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,c2lnbmF0dXJl' },
    timeoutMs,
    ids: { deliveryId: 'del_x', eventId: 'evt_x', webhookId: 'wh_x' },
  });
  const snapshot = (type: any, config: Record<string, unknown>, credentials: unknown) => ({
    id: 'dst_x',
    name: 'x',
    type,
    config: { ...config, credentialsEnc: encryptSecret(JSON.stringify(credentials)) },
  });

  it('refuses private and loopback endpoints unless private destinations are allowed', async () => {
    const server = await startAwsJsonServer((call) => (call.target.endsWith('SendMessage') ? sendMessageAnswer(call) : putEventsAnswer(call)));
    const pubsub = await startPubSubServer();
    const port = new URL(server.url).port;
    const strict = createDestinationSenders({ allowPrivate: false });
    const open = createDestinationSenders({ allowPrivate: true });
    try {
      for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
        const base = `http://${host}:${port}`;
        const destinations = [
          snapshot('aws_sqs', { queueUrl: `${base}/000/q`, region: 'us-east-1' }, aws),
          snapshot('aws_sqs', { queueUrl: 'https://sqs.us-east-1.amazonaws.com/000/q', region: 'us-east-1', endpoint: base }, aws),
          snapshot('aws_eventbridge', { eventBusName: 'b', region: 'us-east-1', source: 's', detailType: 'd', endpoint: base }, aws),
          snapshot('object_storage', { bucket: 'events', endpoint: base, forcePathStyle: true }, aws),
          snapshot('gcp_pubsub', { projectId: 'p', topic: 't', endpoint: `http://${host}:${new URL(pubsub.url).port}` }, serviceAccount),
        ];
        for (const d of destinations) {
          const res = await strict.send(d, request());
          expect(res.failure, `${d.type} ${host}`).toBe('blocked');
          expect(res.statusCode).toBeUndefined();
          expect(res.error).toMatch(/private address/);
        }
      }
      expect(server.calls).toHaveLength(0);
      expect(pubsub.calls).toHaveLength(0);
      const allowed = await open.send(snapshot('aws_sqs', { queueUrl: `${server.url}/000/q`, region: 'us-east-1' }, aws), request());
      expect(allowed.statusCode).toBe(200);
    } finally {
      await strict.close();
      await open.close();
      await server.close();
      await pubsub.close();
    }
  });

  it('connects a Pub/Sub endpoint to the address it checked, never to what a later lookup of the name answers (DNS rebinding)', async () => {
    const pubsub = await startPubSubServer();
    const port = new URL(pubsub.url).port;
    // Every gRPC connection goes through this proxy, which records the address asked for and
    // tunnels to the loopback server whatever it was: what the client dialled is observable.
    const proxy = await startConnectProxy(Number(port));
    const host = 'pubsub.rebind.test';
    let answer = ['203.0.113.7'];
    const realLookup = dns.promises.lookup;
    const lookups = vi.spyOn(dns.promises, 'lookup').mockImplementation(((name: string, options: any) =>
      name === host ? Promise.resolve(answer.map((address) => ({ address, family: net.isIP(address) }))) : realLookup(name, options)) as any);
    const env = { grpc_proxy: process.env.grpc_proxy, no_grpc_proxy: process.env.no_grpc_proxy };
    process.env.grpc_proxy = proxy.url;
    process.env.no_grpc_proxy = 'nothing.invalid';
    const strict = createDestinationSenders({ allowPrivate: false });
    const destination = snapshot('gcp_pubsub', { projectId: 'p', topic: 't', endpoint: `http://${host}:${port}` }, serviceAccount);
    try {
      expect(await strict.send(destination, request())).toMatchObject({ statusCode: 200 });
      expect(proxy.targets).toEqual([`203.0.113.7:${port}`]);
      expect(pubsub.calls.map((c) => c.host)).toEqual([`${host}:${port}`]);

      // The name now answers a private address: refused, and the pinned channel is not used either.
      answer = ['127.0.0.1'];
      const refused = await strict.send(destination, request());
      expect(refused).toMatchObject({ failure: 'blocked', error: 'Pub/Sub Publish: endpoint resolves to a private address (127.0.0.1)' });
      expect(pubsub.calls).toHaveLength(1);

      // Still among the answers: the pinned channel is kept. Gone from them: a new one, to the new address.
      answer = ['203.0.113.8', '203.0.113.7'];
      expect(await strict.send(destination, request())).toMatchObject({ statusCode: 200 });
      answer = ['203.0.113.8'];
      expect(await strict.send(destination, request())).toMatchObject({ statusCode: 200 });
      expect(proxy.targets).toEqual([`203.0.113.7:${port}`, `203.0.113.8:${port}`]);
      expect(pubsub.calls.map((c) => c.host)).toEqual(Array(3).fill(`${host}:${port}`));
      // One lookup per publish, the sender's own: gRPC never resolved the name.
      expect(lookups.mock.calls.filter(([name]) => name === host)).toHaveLength(4);
    } finally {
      await strict.close();
      lookups.mockRestore();
      for (const [k, v] of Object.entries(env)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await proxy.close();
      await pubsub.close();
    }
  });

  it('sends SQS bodies as text only when SQS accepts the characters, and empty bodies as a flagged space', () => {
    const message = (body: Buffer) => sqsMessage({ ...request(), dispatch: { body, contentType: null, headers: {} } });
    expect(message(Buffer.from('tab\tand newline\n é 😀'))).toMatchObject({ body: 'tab\tand newline\n é 😀' });
    const control = message(Buffer.from('bell\u0007'));
    expect(control.body).toBe(Buffer.from('bell\u0007').toString('base64'));
    expect(control.attributes['content-transfer-encoding']).toEqual({ DataType: 'String', StringValue: 'base64' });
    const empty = message(Buffer.alloc(0));
    expect(empty.body).toBe(' ');
    expect(empty.attributes['content-length']).toEqual({ DataType: 'String', StringValue: '0' });
    expect(Object.keys(empty.attributes).sort()).toEqual(['content-length', 'webhook-id', 'webhook-signature', 'webhook-timestamp']);
  });

  it('keeps one client per destination (its connection is reused) and bounds each call by the timeout', async () => {
    const server = await startAwsJsonServer(sendMessageAnswer);
    const senders = createDestinationSenders({ allowPrivate: true });
    const queue = snapshot('aws_sqs', { queueUrl: `${server.url}/000/q`, region: 'us-east-1' }, aws);
    try {
      for (let i = 0; i < 3; i++) expect((await senders.send(queue, request())).statusCode).toBe(200);
      expect(server.calls).toHaveLength(3);
      expect(server.connections).toBe(1);

      const slow = await startSlowServer();
      try {
        const res = await senders.send(snapshot('aws_sqs', { queueUrl: `${slow.url}/000/q`, region: 'us-east-1' }, aws), request(300));
        expect(res.failure).toBe('timeout');
        expect(res.error).toBe('SQS SendMessage: timed out after 300 ms');
        // The call was given up, not left waiting: the request reached the server and its
        // connection was closed by the client.
        expect(slow.requests).toBe(1);
        await waitFor(() => slow.closedByClient === 1, 10_000).catch(() => {});
        expect(slow.closedByClient).toBe(1);
      } finally {
        await slow.close();
      }
    } finally {
      await senders.close();
      await server.close();
    }
  });
});

/** A server that accepts requests and never answers them. */
async function startSlowServer() {
  const { createServer } = await import('node:http');
  const sockets = new Set<import('node:net').Socket>();
  let requests = 0;
  let closedByClient = 0;
  let closing = false;
  const server = createServer(() => {
    requests++;
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      if (!closing) closedByClient++;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as import('node:net').AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    /** Connections the client closed (the server never answers, nor closes one before close()). */
    get closedByClient() {
      return closedByClient;
    },
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** An HTTP CONNECT proxy that records each target asked for and tunnels every one to the loopback `port`. */
async function startConnectProxy(port: number) {
  const { createServer } = await import('node:http');
  const targets: string[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const track = (s: import('node:net').Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const server = createServer((_, res) => res.writeHead(405).end());
  server.on('connect', (req, client: import('node:net').Socket, head: Buffer) => {
    targets.push(req.url ?? '');
    track(client);
    const upstream = net.connect(port, '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    track(upstream);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as import('node:net').AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    targets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
