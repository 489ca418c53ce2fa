import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let apiKey: string;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await ingestingProject(app));
});
afterAll(async () => {
  await app?.stop();
});

type State = 'active' | 'paused' | 'archived';
const ACTIONS = ['pause', 'resume', 'archive', 'restore', 'destroy'] as const;
// The contract's state machine: which actions each state accepts and where they lead.
const ALLOWED: Record<State, Partial<Record<(typeof ACTIONS)[number], State | 'gone'>>> = {
  active: { pause: 'paused', archive: 'archived' },
  paused: { resume: 'active', archive: 'archived' },
  archived: { restore: 'paused', destroy: 'gone' },
};

async function webhookIn(state: State) {
  const wh = await createWebhook(app, apiKey);
  const steps: Record<State, string[]> = { active: [], paused: ['pause'], archived: ['archive'] };
  for (const step of steps[state]) expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/${step}`)).status).toBe(200);
  return wh;
}

describe('webhook lifecycle', () => {
  it('starts active', async () => {
    const wh = await createWebhook(app, apiKey);
    expect(wh.status).toBe('active');
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}`)).body.status).toBe('active');
  });

  for (const state of ['active', 'paused', 'archived'] as State[]) {
    for (const action of ACTIONS) {
      const next = ALLOWED[state][action];
      it(`${action} from ${state}: ${next ? `→ ${next}` : '409 invalid_state'}`, async () => {
        const wh = await webhookIn(state);
        const res = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/${action}`);
        const after = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}`);
        if (!next) {
          expect(res.status).toBe(409);
          expect(res.body.error.code).toBe('invalid_state');
          expect(after.body.status).toBe(state);
        } else if (next === 'gone') {
          expect(res.status).toBe(200);
          expect(res.body).toEqual({ id: wh.id, deleted: true });
          expect(after.status).toBe(404);
        } else {
          expect(res.status).toBe(200);
          expect(res.body.status).toBe(next);
          expect(after.body.status).toBe(next);
        }
      });
    }
  }

  it('answers 404 for unknown webhooks and for another project’s, and 401 without a key', async () => {
    const wh = await createWebhook(app, apiKey);
    const other = await app.project('free');
    for (const action of ACTIONS) {
      expect((await app.api(other.apiKey, 'POST', `/v1/webhooks/${wh.id}/${action}`)).status).toBe(404);
      expect((await app.api(apiKey, 'POST', `/v1/webhooks/wh_unknown/${action}`)).body.error.code).toBe('not_found');
      expect((await app.api(null, 'POST', `/v1/webhooks/${wh.id}/${action}`)).status).toBe(401);
    }
    expect((await app.api(other.apiKey, 'GET', `/v1/webhooks/${wh.id}`)).status).toBe(404);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}`)).status).toBe(200);
  });

  it('destroy removes the webhook and everything under it, queued jobs included', async () => {
    const wh = await createWebhook(app, apiKey);
    const accepted = await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } });
    expect(accepted.status).toBe(202);
    const db = app.rt.db.pool;
    const jobsOf = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'deliveryId' = $1`, [accepted.body.deliveryId])).rows[0].n;
    expect(await jobsOf()).toBe(1);
    await db.query(`INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) SELECT 'dlq_x', project_id, webhook_id, id, 'test' FROM deliveries WHERE id = $1`, [
      accepted.body.deliveryId,
    ]);

    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/archive`)).status).toBe(200);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destroy`)).status).toBe(200);

    for (const table of ['webhooks', 'webhook_secrets', 'destinations', 'events', 'deliveries', 'dlq_entries']) {
      const column = table === 'webhooks' ? 'id' : 'webhook_id';
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${table} WHERE ${column} = $1`, [wh.id]);
      expect(rows[0].n, table).toBe(0);
    }
    expect(await jobsOf()).toBe(0);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(404);
  });

  it('keeps state changes visible to every process at once', async () => {
    const second = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const wh = await createWebhook(app, apiKey);
      const auth = { 'x-webhook-secret': wh.ingestSecret };
      expect((await ingest(second, wh.publicId, { headers: auth })).status).toBe(202);
      await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`);
      expect((await ingest(second, wh.publicId, { headers: auth })).status).toBe(409);
      await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`);
      expect((await ingest(second, wh.publicId, { headers: auth })).status).toBe(202);
      await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/archive`);
      expect((await ingest(second, wh.publicId, { headers: auth })).status).toBe(404);
    } finally {
      await second.stop();
    }
  });

  it('offers the same operations over GraphQL', async () => {
    const wh = await createWebhook(app, apiKey);
    const run = (query: string, variables: Record<string, unknown> = {}) => app.api(apiKey, 'POST', '/graphql', { query, variables });
    const paused = await run('mutation($id: ID!) { pauseWebhook(id: $id) { id status } }', { id: wh.id });
    expect(paused.body.data.pauseWebhook.status).toBe('paused');
    const refused = await run('mutation($id: ID!) { restoreWebhook(id: $id) { status } }', { id: wh.id });
    expect(refused.body.errors[0].extensions.code).toBe('invalid_state');
    const conn = await run('{ webhooksConnection(first: 50, status: paused) { edges { cursor node { id status ingestUrl } } pageInfo { hasNextPage } } }');
    expect(conn.body.data.webhooksConnection.edges.map((e: any) => e.node.id)).toContain(wh.id);
    expect(conn.body.data.webhooksConnection.edges.every((e: any) => e.node.status === 'paused')).toBe(true);
  });
});
