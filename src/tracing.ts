import { SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { log } from './log.ts';
import { SERVICE_VERSION } from './version.ts';

/**
 * Optional OpenTelemetry tracing: with OTEL_EXPORTER_OTLP_ENDPOINT set, ingest, job and delivery
 * attempt spans (with the event id) go to that collector over OTLP/HTTP (JSON), batched. Unset,
 * nothing is loaded into the request path: `withSpan` calls its function directly.
 *
 * One provider per process, shared by every app the process starts (tests start several); the
 * last app to stop flushes and removes it.
 */
let provider: NodeTracerProvider | null = null;
let users = 0;

export function startTracing(endpoint: string | undefined, serviceName: string): { stop(): Promise<void> } {
  if (!endpoint) return { stop: async () => {} };
  if (!provider) {
    // The generic endpoint names the collector; traces go to its /v1/traces (the OTLP/HTTP convention).
    const url = `${endpoint.replace(/\/+$/, '')}/v1/traces`;
    provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': serviceName, 'service.version': SERVICE_VERSION }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }), { scheduledDelayMillis: 1_000 })],
    });
    provider.register();
    log.info({ url }, 'tracing: spans are exported over OTLP/HTTP');
  }
  users++;
  let stopped = false;
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      if (--users > 0 || !provider) return;
      const p = provider;
      provider = null;
      await p.forceFlush().catch((err) => log.warn({ err }, 'tracing: flushing spans failed'));
      await p.shutdown().catch(() => {});
      trace.disable();
    },
  };
}

/** Whether spans are recorded in this process. */
export function tracingEnabled(): boolean {
  return provider !== null;
}

/**
 * Runs `fn` inside a span named `name` (a child of the active span), ending it when `fn` settles
 * and marking it failed when `fn` throws. Without tracing, just runs `fn`.
 */
export function withSpan<T>(name: string, attributes: Attributes, fn: (span: Span | null) => Promise<T>): Promise<T> {
  if (!provider) return fn(null);
  return trace.getTracer('relay-service', SERVICE_VERSION).startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      span.end();
    }
  });
}
