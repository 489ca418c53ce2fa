// Baseline "ingest": the database work of HTTP ingest and nothing else. Per request one
// durable statement, committing on its own: INSERT the event (~1 KB body), its delivery and
// its graphile-worker job (written as the service writes it, without a NOTIFY inside the
// commit). No producer auth, no webhook lookup, no routing, no quota checks.
import { ATTEMPT_TASK, insertAttemptJobRows } from '../../src/deliveries/job.ts';
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
    const deliveryId = newId('del');
    await pool.query({
      name: 'baseline_ingest',
      text: `WITH e AS (
        INSERT INTO events (id, project_id, webhook_id, channel, method, path, query, headers, content_type, body, body_size)
        VALUES ($1, $2, $3, 'http', $4, '/', '{}', $5, $6, $7, $8) RETURNING id
      ), d AS (
        INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination_id, destination, status, next_attempt_at)
        SELECT $9, $2, $3, e.id, $10, $11, 'scheduled', $12 FROM e RETURNING id, webhook_id, next_attempt_at
      ), job AS (
        ${insertAttemptJobRows('d', '$13')}
      )
      SELECT count(*) FROM job`,
      values: [eventId, PROJECT, WEBHOOK, req.method, JSON.stringify(req.headers), req.headers['content-type'] ?? null, body, body.length,
        deliveryId, DESTINATION.id, JSON.stringify(DESTINATION), new Date(Date.now() + 86_400_000), ATTEMPT_TASK],
    });
    sendJson(res, 202, { eventId, deliveryId, status: 'scheduled' });
  },
);
