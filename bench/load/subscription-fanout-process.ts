// Load process for the subscription fan-out scenario: many graphql-ws clients (one WebSocket
// each) subscribed to one conversation, and the REST sender of the messages they wait for.
// Sender and subscribers share this process, so every latency is measured on one clock:
// from the start of the POST that created a message to its arrival at each subscriber.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { serveLoadProcess } from './protocol.ts';
import { percentile } from './receiver.ts';

export interface FanoutInput {
  serviceUrl: string;
  apiKey: string;
  conversationId: string;
  /** graphql-ws clients, each its own WebSocket with one subscription. */
  subscribers: number;
  /** Measured messages, sent one after the other. */
  messages: number;
  /** Pause after each POST's answer before the next POST. */
  gapMs: number;
  /**
   * Messages sent first one at a time, each only after every subscriber received the previous one:
   * they warm the service up and show what one fan-out costs without a backlog.
   */
  isolatedMessages: number;
  /** Clients connecting at once while the sockets are opened. */
  connectBatch: number;
}

export interface FanoutOutput {
  subscribers: number;
  messages: number;
  expected: number;
  received: number;
  missing: number;
  /** Subscribers that missed at least one measured message. */
  subscribersMissing: number;
  duplicates: number;
  subscriptionErrors: number;
  connectSeconds: number;
  /** POST start → arrival, over every (subscriber, message) pair that arrived. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Per message: POST start → arrival at its last subscriber. */
  lastArrivalP50Ms: number;
  lastArrivalP99Ms: number;
  /** POST /v1/messages answer time while the fan-out runs. */
  sendP50Ms: number;
  sendP99Ms: number;
  /** The same POSTs before any subscriber connected: what the fan-out adds to the sender. */
  idleSendP50Ms: number;
  /** Isolated messages: median over them of POST start → arrival at half / at the last of the subscribers. */
  isolatedMedianArrivalMs: number;
  isolatedLastArrivalMs: number;
  /** From the first measured POST's start to the last arrival. */
  windowSeconds: number;
  messagesPerSec: number;
  receiptsPerSec: number;
  /** This process's CPU over the measured window, % of one core: the client's share of the latency. */
  clientCpuPercent: number;
  clientLoopDelayP99Ms: number;
}

const FIELDS = 'id conversation_id message reactions attachments read_at created_at updated_at contact { id username phone_number avatar_url last_active_at created_at }';
const MAX_PROBES = 240;
const PROBE_EVERY_MS = 250;
const IDLE_SENDS = 20;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitUntil(cond: () => boolean, timeoutMs: number, what: string) {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

serveLoadProcess<FanoutInput, FanoutOutput>(async (input) => {
  const { subscribers: S, messages: N } = input;
  const wsUrl = `${input.serviceUrl.replace(/^http/, 'ws')}/graphql`;
  const headers = { authorization: `Bearer ${input.apiKey}`, 'content-type': 'application/json' };

  async function post(message: string): Promise<void> {
    const res = await fetch(`${input.serviceUrl}/v1/messages`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ conversation_id: input.conversationId, message }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`POST /v1/messages answered ${res.status} ${text.slice(0, 300)}`);
  }

  // Per subscriber: seen a probe yet; per (subscriber, message): arrival latency (NaN = not yet).
  const live = new Uint8Array(S);
  let liveCount = 0;
  const latency = new Float64Array(S * N).fill(NaN);
  let received = 0;
  let duplicates = 0;
  let subscriptionErrors = 0;
  let firstError: string | undefined;
  const subscriptionError = (e: unknown) => {
    subscriptionErrors++;
    firstError ??= e instanceof Error ? e.message : JSON.stringify(e);
  };
  const isolatedArrivals = Array.from({ length: input.isolatedMessages }, () => [] as number[]);
  const isolatedStart = new Float64Array(input.isolatedMessages).fill(NaN);
  const sendStart = new Float64Array(N).fill(NaN);
  const clients: Client[] = [];

  function onMessage(s: number, text: string) {
    const now = performance.now();
    const space = text.indexOf(' ');
    const kind = text.slice(0, space);
    const i = Number(text.slice(space + 1));
    if (kind === 'probe') {
      if (!live[s]) (live[s] = 1), liveCount++;
    } else if (kind === 'isolated' && i >= 0 && i < input.isolatedMessages) {
      isolatedArrivals[i].push(now - isolatedStart[i]);
    } else if (kind === 'fanout' && i >= 0 && i < N) {
      const k = s * N + i;
      if (!Number.isNaN(latency[k])) duplicates++;
      else (latency[k] = now - sendStart[i]), received++;
    }
  }

  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  try {
    const idleSendMs: number[] = [];
    for (let i = 0; i < IDLE_SENDS; i++) {
      const t0 = performance.now();
      await post(`idle ${i}`);
      idleSendMs.push(performance.now() - t0);
      await sleep(input.gapMs);
    }
    idleSendMs.sort((a, b) => a - b);

    // Open the sockets in batches: every client is its own WebSocket, acknowledged (authenticated) before the next batch.
    const connectStart = performance.now();
    for (let first = 0; first < S; first += input.connectBatch) {
      const batch: Promise<void>[] = [];
      for (let s = first; s < Math.min(S, first + input.connectBatch); s++) {
        batch.push(
          new Promise<void>((resolve, reject) => {
            const client = createClient({
              url: wsUrl,
              webSocketImpl: WebSocket,
              connectionParams: { authorization: `Bearer ${input.apiKey}` },
              lazy: false,
              retryAttempts: 0,
              connectionAckWaitTimeout: 60_000,
              onNonLazyError: (e) => reject(e instanceof Error ? e : new Error(`subscriber ${s} could not connect: ${JSON.stringify(e)}`)),
              on: { connected: () => resolve() },
            });
            clients.push(client);
          }),
        );
      }
      await withTimeout(Promise.all(batch), 90_000, `connecting subscribers ${first}..${first + batch.length - 1}`);
    }
    const connectSeconds = (performance.now() - connectStart) / 1000;

    clients.forEach((client, s) => {
      client.subscribe<{ messageCreated: { message: string } }>(
        { query: `subscription($c: ID) { messageCreated(conversationId: $c) { ${FIELDS} } }`, variables: { c: input.conversationId } },
        {
          next: (r) => (r.data?.messageCreated ? onMessage(s, r.data.messageCreated.message) : subscriptionError(r.errors)),
          error: subscriptionError,
          complete: () => {},
        },
      );
    });

    // graphql-ws has no "subscribed" acknowledgement: probe until every subscriber has heard one.
    for (let k = 0; liveCount < S; k++) {
      if (k >= MAX_PROBES || subscriptionErrors >= S) throw new Error(`only ${liveCount} of ${S} subscriptions live after ${MAX_PROBES} probes (${subscriptionErrors} subscription errors, first: ${firstError?.slice(0, 300)})`);
      await post(`probe ${k}`);
      await sleep(PROBE_EVERY_MS);
    }
    await sleep(500);

    for (let i = 0; i < input.isolatedMessages; i++) {
      isolatedStart[i] = performance.now();
      await post(`isolated ${i}`);
      await waitUntil(() => isolatedArrivals[i].length >= S, 60_000, `isolated message ${i} to reach every subscriber`);
    }
    const isolatedMedian = isolatedArrivals.map((a) => percentile(a.sort((x, y) => x - y), 50)).sort((a, b) => a - b);
    const isolatedLast = isolatedArrivals.map((a) => a[a.length - 1]).sort((a, b) => a - b);
    await sleep(200);

    // Measured: one POST after the other, `gapMs` after each answer.
    loopDelay.enable();
    const cpu0 = process.cpuUsage();
    const sendMs: number[] = [];
    const windowStart = performance.now();
    for (let i = 0; i < N; i++) {
      sendStart[i] = performance.now();
      await post(`fanout ${i}`);
      sendMs.push(performance.now() - sendStart[i]);
      if (i < N - 1) await sleep(input.gapMs);
    }
    const expected = S * N;
    await waitUntil(() => received >= expected, 60_000, 'every measured message at every subscriber').catch(() => {});
    loopDelay.disable();
    const cpu = process.cpuUsage(cpu0);

    const all: number[] = [];
    let lastArrival = windowStart;
    const perMessageLast = new Array<number>(N).fill(0);
    const missingBy = new Uint8Array(S);
    for (let s = 0; s < S; s++) {
      for (let i = 0; i < N; i++) {
        const l = latency[s * N + i];
        if (Number.isNaN(l)) {
          missingBy[s] = 1;
          continue;
        }
        all.push(l);
        perMessageLast[i] = Math.max(perMessageLast[i], l);
        lastArrival = Math.max(lastArrival, sendStart[i] + l);
      }
    }
    all.sort((a, b) => a - b);
    perMessageLast.sort((a, b) => a - b);
    sendMs.sort((a, b) => a - b);
    const windowMs = lastArrival - windowStart;
    const round = (n: number) => Math.round(n * 10) / 10;
    return {
      subscribers: S,
      messages: N,
      expected,
      received,
      missing: expected - received,
      subscribersMissing: missingBy.reduce((a, b) => a + b, 0),
      duplicates,
      subscriptionErrors,
      connectSeconds: round(connectSeconds),
      p50Ms: round(percentile(all, 50)),
      p99Ms: round(percentile(all, 99)),
      maxMs: round(all[all.length - 1] ?? NaN),
      lastArrivalP50Ms: round(percentile(perMessageLast, 50)),
      lastArrivalP99Ms: round(percentile(perMessageLast, 99)),
      sendP50Ms: round(percentile(sendMs, 50)),
      sendP99Ms: round(percentile(sendMs, 99)),
      idleSendP50Ms: round(percentile(idleSendMs, 50)),
      isolatedMedianArrivalMs: round(percentile(isolatedMedian, 50)),
      isolatedLastArrivalMs: round(percentile(isolatedLast, 50)),
      windowSeconds: windowMs / 1000,
      messagesPerSec: N / (windowMs / 1000),
      receiptsPerSec: received / (windowMs / 1000),
      clientCpuPercent: Math.round(((cpu.user + cpu.system) / 1000 / windowMs) * 100),
      clientLoopDelayP99Ms: round(loopDelay.percentile(99) / 1e6),
    };
  } finally {
    await withTimeout(Promise.allSettled(clients.map((c) => c.dispose())), 10_000, 'closing the subscribers').catch(() => {});
  }
});
