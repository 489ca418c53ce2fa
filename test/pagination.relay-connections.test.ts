// Every event-part list has a Relay connection beside its REST page (CONTRACT §2, DESIGN "REST
// through SOFA, GraphQL for clients"): both read the list through one service function and one
// cursor codec. Each connection is paged here over GraphQL on HTTP, forwards (first/after) and
// backwards (last/before), against the order of its REST list, and the cursors of one are taken
// by the other.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { DEFAULT_RETRY_POLICY } from '../src/webhook-config/retry-policy.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let key: string;
let projectId: string;
let deliveryId: string;
let automationId: string;
let dlqWebhookId: string;
let allowlistWebhookId: string;

interface ListCase {
  /** The connection field and its filter arguments (GraphQL syntax, without the paging ones). */
  field: string;
  args: string;
  /** The node fields selected; the first one identifies a node. */
  select: string;
  /** The REST list (a `/v1` path with its filters) whose order the connection must have. */
  rest: string;
}

const lists = (): ListCase[] => [
  { field: 'alertRulesConnection', args: '', select: 'id name', rest: '/v1/project/alert-rules?' },
  { field: 'alertDispatchesConnection', args: '', select: 'id state', rest: '/v1/project/alert-dispatches?' },
  { field: 'alertDispatchesConnection', args: 'state: "firing"', select: 'id state', rest: '/v1/project/alert-dispatches?state=firing&' },
  { field: 'automationsConnection', args: '', select: 'id name', rest: '/v1/automations?' },
  { field: 'automationVersionsConnection', args: `id: "${automationId}"`, select: 'version codeSha256', rest: `/v1/automations/${automationId}/versions?` },
  { field: 'automationRunsConnection', args: `id: "${automationId}"`, select: 'id status', rest: `/v1/automations/${automationId}/runs?` },
  { field: 'deliveryAttemptsConnection', args: `id: "${deliveryId}"`, select: 'number outcome', rest: `/v1/deliveries/${deliveryId}/attempts?` },
  { field: 'deliveryReplayJobsConnection', args: `id: "${deliveryId}"`, select: 'id kind', rest: `/v1/deliveries/${deliveryId}/replay-jobs?` },
  { field: 'dlqConnection', args: '', select: 'id deliveryId', rest: '/v1/dlq?' },
  { field: 'dlqConnection', args: `webhookId: "${dlqWebhookId}"`, select: 'id deliveryId', rest: `/v1/dlq?webhookId=${dlqWebhookId}&` },
  { field: 'dlqExportConnection', args: 'state: "all"', select: 'id payloadBase64', rest: '/v1/dlq/export?state=all&' },
  { field: 'drainsConnection', args: '', select: 'id name', rest: '/v1/project/drains?' },
  { field: 'webhookEmailAllowlistConnection', args: `id: "${allowlistWebhookId}"`, select: 'id pattern', rest: `/v1/webhooks/${allowlistWebhookId}/email-allowlist?` },
  { field: 'webhookSchedulesConnection', args: `id: "${allowlistWebhookId}"`, select: 'id name', rest: `/v1/webhooks/${allowlistWebhookId}/schedules?` },
  { field: 'webhooksConnection', args: '', select: 'id status', rest: '/v1/webhooks?' },
  { field: 'deliveriesConnection', args: '', select: 'id webhookId', rest: '/v1/deliveries?' },
  { field: 'deliveriesConnection', args: `webhookId: "${dlqWebhookId}", status: "queued"`, select: 'id webhookId', rest: `/v1/deliveries?webhookId=${dlqWebhookId}&status=queued&` },
  { field: 'webhookDeliveriesConnection', args: `id: "${dlqWebhookId}"`, select: 'id webhookId', rest: `/v1/webhooks/${dlqWebhookId}/deliveries?` },
  { field: 'apiKeysConnection', args: '', select: 'id name', rest: '/v1/project/api-keys?' },
  { field: 'auditLogsConnection', args: '', select: 'id action', rest: '/v1/project/audit-logs?' },
  { field: 'auditLogsConnection', args: 'action: "api_key.created"', select: 'id action', rest: '/v1/project/audit-logs?action=api_key.created&' },
];

beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey: key, projectId } = await app.project('enterprise'));
  const prisma = app.rt.db.prisma;

  // Through the REST routes: API keys, alert rules, drains, an email allowlist, schedules (and audit logs of them).
  for (let i = 0; i < 5; i++) {
    expect((await app.api(key, 'POST', '/v1/project/api-keys', { name: `key ${i}` })).status).toBe(201);
    const rule = await app.api(key, 'POST', '/v1/project/alert-rules', { name: `rule ${i}`, condition: { type: 'dlq_added', threshold: 1 }, channels: [{ type: 'email', to: 'ops@example.com' }] });
    expect(rule.status).toBe(201);
    const drain = await app.api(key, 'POST', '/v1/project/drains', { name: `drain ${i}`, url: `https://example.com/drain/${i}` });
    expect(drain.status).toBe(201);
  }
  allowlistWebhookId = (await createWebhook(app, key, { name: 'mail' })).id;
  for (let i = 0; i < 6; i++) expect((await app.api(key, 'POST', `/v1/webhooks/${allowlistWebhookId}/email-allowlist`, { pattern: `sender${i}@example.com` })).status).toBe(201);
  for (let i = 0; i < 4; i++) expect((await app.api(key, 'POST', `/v1/webhooks/${allowlistWebhookId}/schedules`, { name: `yearly ${i}`, cron: '0 0 1 1 *' })).status).toBe(201);

  // Written as the engine and the evaluator write them: dispatches, an automation's versions and runs, a delivery's attempts and replay jobs, DLQ entries.
  const ruleId = (await prisma.alertRule.findFirstOrThrow({ where: { projectId } })).id;
  await prisma.alertDispatch.createMany({
    data: Array.from({ length: 7 }, (_, i) => ({ id: newId('ald'), projectId, ruleId, state: i % 2 ? 'resolved' : 'firing', value: i, channels: [] })),
  });
  automationId = newId('aut');
  await prisma.automation.create({ data: { id: automationId, projectId, name: 'reshape', currentVersion: 6 } });
  await prisma.automationVersion.createMany({
    data: Array.from({ length: 6 }, (_, i) => ({ automationId, projectId, version: i + 1, code: `export default (e) => e; // ${i}`, codeSha256: `sha${i}` })),
  });
  await prisma.automation.create({ data: { id: newId('aut'), projectId, name: 'second' } });
  await prisma.automation.create({ data: { id: newId('aut'), projectId, name: 'third' } });
  await prisma.automationRun.createMany({
    data: Array.from({ length: 5 }, (_, i) => ({
      id: newId('run'),
      projectId,
      automationId,
      version: 6,
      status: 'ok',
      cpuMs: i,
      subrequests: 0,
      logs: '',
      logBytes: 0,
      logsTruncated: false,
    })),
  });

  const wh = await createFixtureWebhook(app.rt, projectId, 'https://example.com/hook', { retryPolicy: DEFAULT_RETRY_POLICY });
  const other = await createFixtureWebhook(app.rt, projectId, 'https://example.com/other', { retryPolicy: DEFAULT_RETRY_POLICY });
  dlqWebhookId = wh.id;
  const deliveries: Array<{ deliveryId: string; webhookId: string }> = [];
  for (let i = 0; i < 25; i++) {
    const target = i % 3 === 0 ? other : wh;
    deliveries.push({ ...(await enqueueFixtureEvent(app.rt, target, JSON.stringify({ i }))), webhookId: target.id });
  }
  deliveryId = deliveries[0].deliveryId;
  await prisma.deliveryAttempt.createMany({
    data: Array.from({ length: 7 }, (_, i) => ({ id: newId('att'), projectId, deliveryId, number: i + 1, startedAt: new Date(), outcome: i < 6 ? 'retry' : 'failed' })),
  });
  await prisma.replayJob.createMany({
    data: Array.from({ length: 5 }, () => ({ id: newId('rpl'), projectId, kind: 'single', sourceDeliveryId: deliveryId, status: 'completed', total: 1, created: 1 })),
  });
  // 24 entries (more than one export page of 20), one of them re-driven.
  await prisma.dlqEntry.createMany({
    data: deliveries.slice(1).map((d, i) => ({ id: newId('dlq'), projectId, webhookId: d.webhookId, deliveryId: d.deliveryId, reason: 'max_attempts', ...(i === 5 ? { redrivenAt: new Date() } : {}) })),
  });
});
afterAll(async () => {
  await app?.stop();
});

async function gql(query: string, variables: Record<string, unknown> = {}, apiKey = key) {
  const res = await app.api(apiKey, 'POST', '/graphql', { query, variables });
  return res.body as { data?: any; errors?: Array<{ message: string; extensions?: any }> };
}

interface ConnectionPage {
  edges: Array<{ cursor: string; node: Record<string, unknown> }>;
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

async function connection(list: ListCase, paging: { first?: number; after?: string; last?: number; before?: string }): Promise<ConnectionPage> {
  const filters = list.args ? `${list.args}, ` : '';
  const query = `query($first: Int, $after: String, $last: Int, $before: String) {
    c: ${list.field}(${filters}first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { ${list.select} } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }`;
  const res = await gql(query, paging);
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data.c;
}

const idOf = (list: ListCase) => (node: Record<string, unknown>) => String(node[list.select.split(' ')[0]]);

/** Every item of the REST list, in its order. */
async function restIds(list: ListCase): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await app.api(key, 'GET', `${list.rest}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(res.status, `${list.rest} ${JSON.stringify(res.body)}`).toBe(200);
    ids.push(...res.body.items.map(idOf(list)));
    cursor = res.body.nextCursor;
  } while (cursor);
  return ids;
}

describe('Relay connections beside the REST lists', () => {
  it('pages forwards with first/after through every item, in the REST order', async () => {
    for (const list of lists()) {
      const expected = await restIds(list);
      expect(expected.length, list.field).toBeGreaterThanOrEqual(3);
      const seen: string[] = [];
      let after: string | undefined;
      for (let page = 0; ; page++) {
        const c = await connection(list, { first: 2, after });
        seen.push(...c.edges.map((e) => idOf(list)(e.node)));
        expect(c.pageInfo.hasPreviousPage, list.field).toBe(page > 0);
        expect(c.pageInfo.startCursor).toBe(c.edges[0].cursor);
        expect(c.pageInfo.endCursor).toBe(c.edges.at(-1)!.cursor);
        if (!c.pageInfo.hasNextPage) break;
        expect(c.edges, list.field).toHaveLength(2);
        after = c.pageInfo.endCursor!;
        expect(page).toBeLessThan(30);
      }
      expect(seen, `${list.field}(${list.args})`).toEqual(expected);
    }
  });

  it('pages backwards with last/before from the end, in the REST order', async () => {
    for (const list of lists()) {
      const expected = await restIds(list);
      let seen: string[] = [];
      let before: string | undefined;
      for (let page = 0; ; page++) {
        const c = await connection(list, { last: 3, before });
        seen = [...c.edges.map((e) => idOf(list)(e.node)), ...seen];
        expect(c.pageInfo.hasNextPage, list.field).toBe(page > 0);
        if (!c.pageInfo.hasPreviousPage) break;
        expect(c.edges, list.field).toHaveLength(3);
        before = c.pageInfo.startCursor!;
        expect(page).toBeLessThan(30);
      }
      expect(seen, `${list.field}(${list.args})`).toEqual(expected);
    }
  });

  it('shares its cursors with the REST page (one codec): an edge cursor is a REST cursor and a nextCursor an `after`', async () => {
    for (const list of lists()) {
      const expected = await restIds(list);
      const first = await connection(list, { first: 2 });
      const rest = await app.api(key, 'GET', `${list.rest}limit=2&cursor=${encodeURIComponent(first.pageInfo.endCursor!)}`);
      expect(rest.status, list.field).toBe(200);
      expect(rest.body.items.map(idOf(list)), list.field).toEqual(expected.slice(2, 4));
      const restFirst = await app.api(key, 'GET', `${list.rest}limit=1`);
      const next = await connection(list, { first: 2, after: restFirst.body.nextCursor });
      expect(next.edges.map((e) => idOf(list)(e.node)), list.field).toEqual(expected.slice(1, 3));
      // An edge's cursor is the nextCursor the REST page ending at that item answers.
      expect(first.edges[0].cursor).toBe(restFirst.body.nextCursor);
    }
  });

  it('reads a window between after and before', async () => {
    const list = lists().find((l) => l.field === 'deliveryAttemptsConnection')!;
    const all = await connection(list, { first: 7 });
    expect(all.edges.map((e) => e.node.number)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const window = await connection(list, { first: 10, after: all.edges[1].cursor, before: all.edges[5].cursor });
    expect(window.edges.map((e) => e.node.number)).toEqual([3, 4, 5]);
    const tail = await connection(list, { last: 2, after: all.edges[1].cursor, before: all.edges[5].cursor });
    expect(tail.edges.map((e) => e.node.number)).toEqual([4, 5]);
    expect(tail.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: true });
  });

  it('clamps page sizes as REST does (the DLQ export to 20 rows)', async () => {
    const dlqExport = lists().find((l) => l.field === 'dlqExportConnection')!;
    const page = await connection(dlqExport, { first: 100 });
    expect(page.edges).toHaveLength(20);
    expect(page.pageInfo.hasNextPage).toBe(true);
    const dlq = lists().find((l) => l.field === 'dlqConnection' && !l.args)!;
    expect((await connection(dlq, { first: 1000 })).edges).toHaveLength(23);
    expect((await connection(dlq, {})).edges).toHaveLength(20);
  });

  it('binds cursors to the list and its filters, refuses first with last, and answers what the REST route answers', async () => {
    const [all, byWebhook] = lists().filter((l) => l.field === 'dlqConnection');
    const cursor = (await connection(byWebhook, { first: 1 })).pageInfo.endCursor;
    const filtered = await gql(`query($a: String) { dlqConnection(after: $a) { edges { cursor } } }`, { a: cursor });
    expect(filtered.errors?.[0].extensions).toMatchObject({ code: 'invalid_cursor' });
    const otherList = await gql(`query($a: String) { drainsConnection(after: $a) { edges { cursor } } }`, { a: cursor });
    expect(otherList.errors?.[0].extensions).toMatchObject({ code: 'invalid_cursor' });
    const tampered = await gql(`query($b: String) { dlqConnection(before: $b) { edges { cursor } } }`, { b: `${cursor}x` });
    expect(tampered.errors?.[0].extensions).toMatchObject({ code: 'invalid_cursor' });
    const both = await gql(`{ dlqConnection(first: 1, last: 1) { edges { cursor } } }`);
    expect(both.errors?.[0].extensions).toMatchObject({ code: 'invalid_request', param: 'last' });
    expect((await connection(all, { first: 1 })).edges).toHaveLength(1);

    const free = await app.project('free');
    const gated = await gql(`{ drainsConnection(first: 1) { edges { cursor } } }`, {}, free.apiKey);
    expect(gated.errors?.[0].extensions).toMatchObject({ code: 'tier_required' });
    const foreign = await gql(`{ deliveryAttemptsConnection(id: "${deliveryId}") { edges { cursor } } }`, {}, free.apiKey);
    expect(foreign.errors?.[0].extensions).toMatchObject({ code: 'not_found' });
    const badFilter = await gql(`{ alertDispatchesConnection(state: "maybe") { edges { cursor } } }`);
    expect(badFilter.errors?.[0].extensions).toMatchObject({ code: 'invalid_request', param: 'state' });
  });
});
