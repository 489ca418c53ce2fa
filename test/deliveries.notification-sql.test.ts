// Claims and results notify deliveryUpdated in their own statements, with the notification computed
// by PostgreSQL (deliveryNotificationSql); it must carry what the API shows for the same row
// (deliveryView(row)), whatever the row holds, and a reference instead when too large to travel inline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryView } from '../src/deliveries/delivery-view.ts';
import { deliveryNotificationSql, deliveryTopic } from '../src/deliveries/notify.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('the delivery notification computed in SQL', () => {
  it('equals the one the service computes, for every shape of delivery row, and falls back to a reference when too large', async () => {
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, 'http://127.0.0.1:9/x');
    const shapes: [string, string][] = [
      ['as queued', 'SELECT $1::text'],
      [
        'delivering, with a secret in its destination, a last attempt and a next attempt time',
        `UPDATE deliveries SET status = 'delivering', attempts = 2, next_attempt_at = '2026-11-26 10:11:12.345',
                destination = jsonb_build_object('id', 'dst_1', 'type', 'sqs', 'config', jsonb_build_object('queueUrl', 'https://q', 'credentials', jsonb_build_object('k', 'v'), 'credentialsEnc', 'x', 'secretEnc', 'y')),
                last_attempt = '{"statusCode": 503, "durationMs": 12, "error": null, "at": "2026-11-26T10:00:00.000Z"}'::jsonb WHERE id = $1`,
      ],
      [
        'succeeded, with an automation, an idempotency key and a completion time',
        `UPDATE deliveries SET status = 'succeeded', completed_at = '2026-11-26 23:59:59.999', automation_id = 'aut_1', automation_version = 3,
                idempotency_key = 'key-1', next_attempt_at = NULL WHERE id = $1`,
      ],
      ['a destination without a config object', `UPDATE deliveries SET destination = '{"id": "dst_2", "config": "opaque"}'::jsonb WHERE id = $1`],
      ['a destination that is not an object', `UPDATE deliveries SET destination = '"plain"'::jsonb WHERE id = $1`],
      ['too large to travel inline', `UPDATE deliveries SET last_attempt = jsonb_build_object('error', repeat('x', 9000)) WHERE id = $1`],
    ];
    for (const [name, sql] of shapes) {
      const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
      await app.rt.db.pool.query(sql, [deliveryId]);
      const { rows } = await app.rt.db.pool.query(`SELECT a.*, ${deliveryNotificationSql('a')} AS notification FROM deliveries a WHERE a.id = $1`, [deliveryId]);
      const { notification, ...row } = rows[0];
      const inline = JSON.stringify({ t: deliveryTopic(projectId), p: deliveryView(row) });
      // NOTIFY payloads are capped at 8,000 bytes: past 7,500 a reference travels instead.
      const expected = Buffer.byteLength(inline) > 7_500 ? { t: deliveryTopic(projectId), r: deliveryId } : JSON.parse(inline);
      expect(JSON.parse(notification), name).toEqual(expected);
    }
    const big = JSON.parse((await app.rt.db.pool.query(`SELECT ${deliveryNotificationSql('a')} AS n FROM deliveries a WHERE a.last_attempt ? 'error' AND length(a.last_attempt->>'error') > 8000`)).rows[0].n);
    expect(big).toEqual({ t: `delivery:${projectId}`, r: expect.stringMatching(/^del_/) });
  });
});
