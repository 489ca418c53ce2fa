import type { FanoutInput, FanoutOutput } from '../load/subscription-fanout-process.ts';
import type { Scenario } from '../scenario.ts';

const SUBSCRIBERS = 1_000;
const MESSAGES = 100;
const GAP_MS = 20;
/** The issue's bar for the send → subscriber latency. */
const TARGET_P99_MS = 250;

const subscriptionFanout: Scenario = {
  name: 'subscription-fanout',
  description:
    `${SUBSCRIBERS.toLocaleString('en')} graphql-ws clients (one WebSocket each, in one load process) subscribed to messageCreated of one conversation; ` +
    `${MESSAGES} messages sent over REST one after the other (${GAP_MS} ms after each answer). Latency: POST start → arrival at a subscriber, ` +
    `over all ${(SUBSCRIBERS * MESSAGES).toLocaleString('en')} receipts (the issue's bar: p99 < ${TARGET_P99_MS} ms); messages/s and receipts/s from the first POST to the last arrival. ` +
    'Before them, 10 messages one at a time (each once all subscribers have the previous) show the cost of one fan-out without a backlog. No bare baseline.',
  timeoutMs: 10 * 60_000,
  async run(ctx) {
    const res = await fetch(`${ctx.serviceUrl}/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bench-fanout', phone_number: '+15550101' }),
      signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(30_000)]),
    });
    const contact: any = await res.json();
    if (res.status !== 200 || !contact?.conversation_id) throw new Error(`POST /v1/contacts answered ${res.status} ${JSON.stringify(contact)}`);

    const r = await ctx.runLoadProcess<FanoutOutput>(
      'bench/load/subscription-fanout-process.ts',
      {
        serviceUrl: ctx.serviceUrl,
        apiKey: ctx.apiKey,
        conversationId: contact.conversation_id,
        subscribers: SUBSCRIBERS,
        messages: MESSAGES,
        gapMs: GAP_MS,
        isolatedMessages: 10,
        connectBatch: 50,
      } satisfies FanoutInput,
      { timeoutMs: 8 * 60_000 },
    );
    ctx.log(JSON.stringify(r));
    const completeness =
      r.missing === 0
        ? `all ${r.expected.toLocaleString('en')} receipts arrived`
        : `${r.missing.toLocaleString('en')} of ${r.expected.toLocaleString('en')} receipts MISSING (${r.subscribersMissing} subscribers short)`;
    const verdict = r.p99Ms < TARGET_P99_MS ? 'meets' : 'misses';
    return [
      {
        name: 'subscription-fanout receipts',
        throughput: r.receiptsPerSec,
        unit: 'receipts/s',
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        notes:
          `${r.subscribers} sockets × ${r.messages} messages; ${completeness}${r.duplicates ? `, ${r.duplicates} duplicates` : ''}` +
          `${r.subscriptionErrors ? `, ${r.subscriptionErrors} subscription errors` : ''}; ${verdict} the target (p99 < ${TARGET_P99_MS} ms); max ${r.maxMs} ms; ` +
          `load process CPU ${r.clientCpuPercent} % of a core, its event-loop delay p99 ${r.clientLoopDelayP99Ms} ms; sockets opened in ${r.connectSeconds} s`,
      },
      {
        name: 'subscription-fanout messages',
        throughput: r.messagesPerSec,
        unit: 'messages/s',
        p50Ms: r.lastArrivalP50Ms,
        p99Ms: r.lastArrivalP99Ms,
        notes:
          `latency: POST start → arrival at the message's last subscriber; one message alone (no backlog, median of 10): ` +
          `half the subscribers in ${r.isolatedMedianArrivalMs} ms, all in ${r.isolatedLastArrivalMs} ms; ` +
          `POST /v1/messages answered in p50 ${r.sendP50Ms} ms, p99 ${r.sendP99Ms} ms (p50 ${r.idleSendP50Ms} ms with no subscriber); ${r.windowSeconds.toFixed(1)} s from the first POST to the last arrival`,
      },
    ];
  },
};

export default subscriptionFanout;
