// Baseline "ingest": the database work of HTTP ingest and nothing else. Per request one
// durable transaction: BEGIN; INSERT the event (~1 KB body); INSERT the delivery and its
// graphile-worker job (the service's own insertDelivery); COMMIT. No producer auth, no
// webhook lookup, no routing, no quota checks.
import { insertDelivery } from '../../src/deliveries/enqueue.ts';
import { newId } from '../../src/ids.ts';
import { readBody, sendJson, serveBare } from './bare-server.ts';

const PROJECT = 'prj_bench_baseline';
const WEBHOOK = 'wh_bench_baseline';
const DESTINATION = { id: 'dst_bench_baseline', name: 'default', type: 'webhook', config: { url: 'http://127.0.0.1:9/hook', method: 'POST' } };

await serveBare(
  async (pool) => {
    await pool.query(`INSERT INTO projects (id, name, tier, updated_at) VALUES ($1, 'bench baseline', 'enterprise', now()) ON CONFLICT DO NOTHING`, [PROJECT]);
    // Paused: a job runner on the same database leaves these deliveries alone.
    await pool.query(
      `INSERT INTO webhooks (id, project_id, public_id, status, retry_policy, updated_at) VALUES ($1, $2, 'hook_bench_baseline', 'paused', '{}', now()) ON CONFLICT DO NOTHING`,
      [WEBHOOK, PROJECT],
    );
  },
  async (req, res, pool) => {
    const body = Buffer.from(await readBody(req, 10 * 1024 * 1024));
    const eventId = newId('evt');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO events (id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size)
         VALUES ($1, $2, $3, 'http', $4, '/', '{}', $5, $6, $7, $8)`,
        [eventId, PROJECT, WEBHOOK, req.method, JSON.stringify(req.headers), req.headers['content-type'] ?? null, body, body.length],
      );
      const delivery = await insertDelivery(client, { projectId: PROJECT, webhookId: WEBHOOK, eventId, destinationId: DESTINATION.id, destination: DESTINATION, runAt: new Date(Date.now() + 86_400_000) });
      await client.query('COMMIT');
      sendJson(res, 202, { eventId, deliveryId: delivery.id, status: delivery.status });
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  },
);
