import type { Scenario } from '../scenario.ts';

const SEED_MESSAGES = 200;
const SEED_CONCURRENCY = 8;
/** The bar: the list route keeps at least half of the bare indexed read's throughput. */
const TARGET_RATIO = 0.5;

async function api(ctx: { serviceUrl: string; apiKey: string; signal: AbortSignal }, method: string, path: string, body?: unknown) {
  const res = await fetch(`${ctx.serviceUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ctx.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(30_000)]),
  });
  const json: any = await res.json().catch(() => undefined);
  if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const messagesList: Scenario = {
  name: 'messages-list',
  description:
    `GET /v1/messages?limit=10 with the API key, ${SEED_MESSAGES} messages of one contact seeded over REST: authentication, ` +
    'SOFA over GraphQL, the page query with each message\'s contact, has_more, JSON. Compared with the bare indexed read of 10 rows ' +
    `(the issue's bar: ≥ ${TARGET_RATIO.toFixed(2)}×).`,
  baseline: 'read',
  async run(ctx) {
    const contact = await api(ctx, 'POST', '/v1/contacts', { username: 'bench-list', phone_number: '+15550100' });
    let next = 0;
    await Promise.all(
      Array.from({ length: SEED_CONCURRENCY }, async () => {
        while (next < SEED_MESSAGES && !ctx.signal.aborted) {
          const i = next++;
          await api(ctx, 'POST', '/v1/messages', { conversation_id: contact.conversation_id, message: `bench message ${i} ${'x'.repeat(100)}` });
        }
      }),
    );
    ctx.log(`seeded ${SEED_MESSAGES} messages in ${contact.conversation_id}`);

    // autocannon only counts statuses: check once that the page is what we think it is.
    const page = await api(ctx, 'GET', '/v1/messages?limit=10');
    if (page?.data?.length !== 10 || page.has_more !== true || page.data[0]?.contact?.username !== 'bench-list') {
      throw new Error(`GET /v1/messages?limit=10 answered ${JSON.stringify(page).slice(0, 500)}`);
    }
    const bytes = Buffer.byteLength(JSON.stringify(page));

    const figures = await ctx.autocannon({ path: '/v1/messages?limit=10', headers: { authorization: `Bearer ${ctx.apiKey}` } });
    const base = await ctx.baseline('read', { connections: figures.connections, duration: figures.duration });
    const ratio = figures.throughput / base.throughput;
    const verdict = ratio >= TARGET_RATIO ? 'meets' : 'misses';
    return [
      {
        name: 'messages-list',
        ...figures,
        notes: `${verdict} the target (≥ ${TARGET_RATIO.toFixed(2)}× of baseline:read); answer ${(bytes / 1024).toFixed(1)} KB (10 messages with their contact)`,
      },
    ];
  },
};

export default messagesList;
