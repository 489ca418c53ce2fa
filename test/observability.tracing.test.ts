import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingEnabled } from '../src/tracing.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

/** A loopback OTLP/HTTP collector: keeps every span posted to /v1/traces (JSON encoding). */
interface CollectedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes: Record<string, unknown>;
  service: unknown;
}
async function startCollector() {
  const spans: CollectedSpan[] = [];
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      paths.push(req.url ?? '');
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
      for (const rs of body.resourceSpans ?? []) {
        const service = rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value?.stringValue;
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              name: s.name,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              service,
              attributes: Object.fromEntries((s.attributes ?? []).map((a: any) => [a.key, Object.values(a.value ?? {})[0]])),
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, paths, close: () => new Promise<void>((r) => server.close(() => r())) };
}

let collector: Awaited<ReturnType<typeof startCollector>>;
let app: TestApp;
beforeAll(async () => {
  collector = await startCollector();
  app = await startTestApp({ worker: true, config: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'relay-test' } });
});
afterAll(async () => {
  await app?.stop();
  await collector?.close();
});

describe('OpenTelemetry tracing (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  it('exports ingest, job and delivery attempt spans with the event id; stopping the app flushes and turns tracing off', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey } = await ingestingProject(app);
      const wh = await createWebhook(app, apiKey, { url: `${receiver.url}/hook` });
      const res = await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } });
      expect(res.status).toBe(202);
      const eventId = res.body.eventId as string;
      const refused = await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': 'wrong' } });
      expect(refused.status).toBe(401);

      const attempt = (await waitFor(() => collector.spans.find((s) => s.name === 'delivery.attempt' && s.attributes['relay.event_id'] === eventId), 15_000))!;
      const accepted = (await waitFor(() => collector.spans.find((s) => s.name === 'ingest' && s.attributes['relay.event_id'] === eventId), 10_000))!;
      expect(accepted.attributes).toMatchObject({ 'relay.channel': 'http', 'relay.webhook.public_id': wh.publicId, 'relay.delivery_id': res.body.deliveryId, 'relay.status': 'queued' });
      expect(accepted.service).toBe('relay-test');
      expect(attempt.attributes).toMatchObject({ 'relay.delivery_id': res.body.deliveryId, 'relay.webhook_id': wh.id, 'relay.attempt': expect.anything() });
      // The attempt runs inside its job's span.
      const job = collector.spans.find((s) => s.spanId === attempt.parentSpanId);
      expect(job?.name).toBe('job deliveries__attempt');
      expect(job?.traceId).toBe(attempt.traceId);
      const refusal = (await waitFor(() => collector.spans.find((s) => s.name === 'ingest' && s.attributes['relay.refused'] === 'unauthorized'), 10_000))!;
      expect(refusal.attributes['relay.webhook.public_id']).toBe(wh.publicId);
      expect(collector.paths.every((p) => p === '/v1/traces')).toBe(true);
      expect(receiver.received).toHaveLength(1);
    } finally {
      await receiver.close();
    }
    expect(tracingEnabled()).toBe(true);
    await app.stop();
    expect(tracingEnabled()).toBe(false);
  });
});
