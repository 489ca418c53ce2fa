// `relay listen WEBHOOK_ID --forward-to URL` (CONTRACT §13): a session of the webhook's cli
// destination over the GraphQL WebSocket; each delivery handed to it is sent to the local URL and
// its answer reported back, where the attempt is recorded like any other.
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { createForwarder, type ForwardResult } from './forward.ts';
import { clock, RelayError, type Output } from './output.ts';
import type { Connection } from './settings.ts';

const LISTEN = `subscription Listen($webhookId: ID!, $destinationId: ID) {
  listen(webhookId: $webhookId, destinationId: $destinationId) {
    type
    sessionId
    webhookId
    destination { id name }
    delivery { handoffId deliveryId eventId method headers bodyBase64 timeoutMs }
  }
}`;

const ANSWER = `mutation Answer($sessionId: ID!, $handoffId: ID!, $statusCode: Int, $durationMs: Int!, $error: String, $failure: String, $responseSnippet: String, $retryAfter: String) {
  answerListenDelivery(sessionId: $sessionId, handoffId: $handoffId, statusCode: $statusCode, durationMs: $durationMs, error: $error, failure: $failure, responseSnippet: $responseSnippet, retryAfter: $retryAfter)
}`;

interface ListenEvent {
  type: 'ready' | 'delivery';
  sessionId: string;
  webhookId: string;
  destination: { id: string; name: string };
  delivery: { handoffId: string; deliveryId: string; eventId: string; method: string; headers: Record<string, string>; bodyBase64: string; timeoutMs: number } | null;
}

export interface ListenOptions {
  webhookId: string;
  forwardTo: string;
  destinationId?: string;
}

/** Close codes of graphql-ws: the server refused the key (onConnect returned false). */
const FORBIDDEN = 4403;
const PONG_WAIT_MS = 5_000;

/** Waits 0.5 s, 1 s, 2 s, … up to 10 s between reconnections, with a little jitter. */
export function reconnectDelayMs(retries: number): number {
  return Math.min(500 * 2 ** retries, 10_000) + Math.floor(Math.random() * 250);
}

function closeCode(e: unknown): number | undefined {
  return typeof (e as { code?: unknown } | null)?.code === 'number' ? (e as { code: number }).code : undefined;
}

function describeClose(e: unknown): string {
  const code = closeCode(e);
  const reason = (e as { reason?: unknown } | null)?.reason;
  if (code !== undefined) return `closed with ${code}${typeof reason === 'string' && reason ? ` ${reason}` : ''}`;
  return (e as Error)?.message ?? String(e);
}

function wsUrl(baseUrl: string): string {
  const u = new URL('/graphql', `${baseUrl}/`);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0;
}

/**
 * Runs until SIGINT/SIGTERM (resolves 0 after the summary) or a failure no reconnection can mend:
 * the key refused, an unknown webhook, no cli destination (rejects with a RelayError).
 */
export function listen(conn: Connection, opts: ListenOptions, out: Output): Promise<number> {
  if (!URL.canParse(opts.forwardTo) || !/^https?:$/.test(new URL(opts.forwardTo).protocol)) {
    return Promise.reject(new RelayError('invalid_forward_to', `--forward-to must be an http or https URL (got ${JSON.stringify(opts.forwardTo)}).`));
  }
  const target = new URL(opts.forwardTo);
  const localPath = `${target.pathname}${target.search}`;
  const forwarder = createForwarder(target);
  const started = Date.now();
  const durations: number[] = [];
  const tally = { deliveries: 0, succeeded: 0, failed: 0, errors: 0 };
  let sessionId: string | undefined;
  let everReady = false;
  let down: 'lost' | 'unreachable' | undefined;
  let pongTimer: NodeJS.Timeout | undefined;
  let client: Client;

  return new Promise<number>((resolve, reject) => {
    let finished = false;
    const finish = (err?: RelayError) => {
      if (finished) return;
      finished = true;
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      clearTimeout(pongTimer);
      void client.dispose();
      forwarder.close();
      if (err) reject(err);
      else resolve(0);
    };
    const stop = () => {
      const sorted = [...durations].sort((a, b) => a - b);
      const p50 = percentile(sorted, 50);
      const seconds = Math.round((Date.now() - started) / 1000);
      out.line(
        `\n${tally.deliveries} ${tally.deliveries === 1 ? 'delivery' : 'deliveries'} forwarded in ${seconds} s: ${tally.succeeded} answered 2xx, ${tally.failed} answered otherwise, ${tally.errors} not answered` +
          (sorted.length ? `; p50 ${p50} ms, slowest ${sorted[sorted.length - 1]} ms` : ''),
        { type: 'summary', ...tally, p50Ms: sorted.length ? p50 : null, maxMs: sorted.length ? sorted[sorted.length - 1] : null, seconds },
      );
      finish();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);

    client = createClient({
      url: wsUrl(conn.baseUrl),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${conn.apiKey}` },
      keepAlive: 10_000,
      retryAttempts: Infinity,
      retryWait: (retries) => new Promise((r) => setTimeout(r, reconnectDelayMs(retries))),
      shouldRetry: (e) => closeCode(e) !== FORBIDDEN,
      on: {
        closed: (e) => {
          clearTimeout(pongTimer);
          if (finished || closeCode(e) === FORBIDDEN || down) return;
          down = everReady ? 'lost' : 'unreachable';
          const what = everReady ? `connection to ${conn.baseUrl} lost (${describeClose(e)}); reconnecting` : `cannot reach ${wsUrl(conn.baseUrl)} (${describeClose(e)}); retrying`;
          out.line(`${clock(new Date())}  ${what}`, { type: 'reconnecting', time: new Date().toISOString(), reason: describeClose(e) });
        },
        error: (e) => {
          if (finished || down) return;
          down = everReady ? 'lost' : 'unreachable';
          out.line(`${clock(new Date())}  cannot reach ${wsUrl(conn.baseUrl)} (${describeClose(e)}); retrying`, { type: 'reconnecting', time: new Date().toISOString(), reason: describeClose(e) });
        },
        // A connection that died without a word (a laptop asleep, a network gone) is noticed by its unanswered ping.
        ping: (received) => {
          if (received) return;
          clearTimeout(pongTimer);
          pongTimer = setTimeout(() => client.terminate(), PONG_WAIT_MS);
        },
        pong: (received) => {
          if (received) clearTimeout(pongTimer);
        },
      },
    });

    // The service refuses text PostgreSQL cannot hold (NUL): the record shows U+FFFD there, as for HTTP destinations.
    const storable = (text: string | undefined) => (text === undefined ? null : text.replace(/\u0000/g, '\uFFFD'));
    const answer = (session: string, handoffId: string, r: ForwardResult) =>
      new Promise<void>((done) => {
        client.subscribe(
          {
            query: ANSWER,
            variables: {
              sessionId: session,
              handoffId,
              statusCode: r.statusCode ?? null,
              durationMs: r.durationMs,
              error: storable(r.error),
              failure: r.failure ?? null,
              responseSnippet: storable(r.snippet),
              retryAfter: storable(r.retryAfter),
            },
          },
          { next: () => {}, error: () => done(), complete: () => done() },
        );
      });

    const deliver = async (session: string, d: NonNullable<ListenEvent['delivery']>) => {
      const at = new Date();
      const r = await forwarder.forward({ method: d.method, headers: d.headers, body: Buffer.from(d.bodyBase64, 'base64'), timeoutMs: d.timeoutMs });
      tally.deliveries++;
      if (r.statusCode === undefined) tally.errors++;
      else if (r.statusCode >= 200 && r.statusCode < 300) tally.succeeded++;
      else tally.failed++;
      durations.push(r.durationMs);
      // The answer first: the attempt waits for it, the terminal does not.
      const answered = answer(session, d.handoffId, r);
      const outcome = r.statusCode !== undefined ? String(r.statusCode) : `error: ${r.error}`;
      out.line(`${clock(at)}  ${d.deliveryId}  ${d.method} ${localPath}  ${outcome}  ${r.durationMs} ms`, {
        type: 'delivery',
        time: at.toISOString(),
        deliveryId: d.deliveryId,
        eventId: d.eventId,
        method: d.method,
        url: target.toString(),
        path: localPath,
        statusCode: r.statusCode ?? null,
        durationMs: r.durationMs,
        error: r.error ?? null,
      });
      await answered;
    };

    client.subscribe<{ listen: ListenEvent }>(
      { query: LISTEN, variables: { webhookId: opts.webhookId, destinationId: opts.destinationId ?? null } },
      {
        next: (result) => {
          const failure = result.errors?.[0];
          if (failure) {
            const code = String((failure.extensions as { code?: unknown } | undefined)?.code ?? 'failed');
            return finish(new RelayError(code, failure.message));
          }
          const e = result.data?.listen;
          if (!e) return;
          if (e.type === 'ready') {
            const again = everReady;
            everReady = true;
            down = undefined;
            sessionId = e.sessionId;
            const text = again
              ? `${clock(new Date())}  reconnected; forwarding to ${target} again`
              : `Ready: forwarding the deliveries of webhook ${e.webhookId} (cli destination ${e.destination.name}, ${e.destination.id}) to ${target}. Ctrl-C to stop.`;
            out.line(text, { type: 'ready', sessionId, webhookId: e.webhookId, destinationId: e.destination.id, destinationName: e.destination.name, forwardTo: target.toString(), reconnected: again });
            return;
          }
          if (e.type === 'delivery' && e.delivery) void deliver(e.sessionId, e.delivery);
        },
        error: (err) => {
          if (closeCode(err) === FORBIDDEN) return finish(new RelayError('unauthorized', `the server refused the API key: check --api-key or RELAY_API_KEY.`, 401));
          const list = Array.isArray(err) ? (err as { message?: string }[]) : undefined;
          finish(new RelayError('failed', list ? list.map((x) => x.message).join('; ') : describeClose(err)));
        },
        // The server ended the session (it is shutting down): the client reconnects, and the session with it.
        complete: () => {
          if (!finished) finish(new RelayError('ended', 'the server ended the session.'));
        },
      },
    );
  });
}
