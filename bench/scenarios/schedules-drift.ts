import pg from 'pg';
import { startTimingReceiver, percentile } from '../load/receiver.ts';
import type { Scenario } from '../scenario.ts';

const SCHEDULES = 10_000;
const WINDOW_SECONDS = 60;

/**
 * 10,000 schedules, each firing once a minute (six-field expressions spread over the 60 seconds,
 * ~167 ticks/s), on the service's one job runner, delivering to a loopback receiver. The figure
 * is the drift of each tick: when its event was stored minus its planned time.
 */
const schedulesDrift: Scenario = {
  name: 'schedules-drift',
  description:
    `${SCHEDULES.toLocaleString('en')} schedules firing once a minute each (spread over the seconds: ~${Math.round(SCHEDULES / 60)} ticks/s) on one job runner ` +
    `for ${WINDOW_SECONDS} s, each tick an event through the ingest statement and a delivery to a loopback receiver. ` +
    'p50/p99 are the drift (event stored − planned tick), in ms; ticks counted once each.',
  timeoutMs: (WINDOW_SECONDS + 300) * 1000,
  async run(ctx) {
    const receiver = await startTimingReceiver();
    const db = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2, options: '-c TimeZone=UTC' });
    try {
      const res = await fetch(`${ctx.serviceUrl}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'schedules-drift', url: `${receiver.url}/tick` }),
      });
      if (res.status !== 201) throw new Error(`creating the webhook: ${res.status} ${await res.text()}`);
      const webhook = (await res.json()) as { id: string };
      // The schedules and their first ticks, as the create route writes them (row + keyed job), in bulk.
      const start = new Date(Math.ceil((Date.now() + 10_000) / 1000) * 1000);
      const end = new Date(start.getTime() + WINDOW_SECONDS * 1000);
      await db.query(
        `WITH s AS (
           INSERT INTO schedules (id, project_id, webhook_id, cron, next_run_at, updated_at)
           SELECT 'sch_bench' || lpad(i::text, 6, '0'), $1, $2, (i % 60)::text || ' * * * * *', t.at AT TIME ZONE 'UTC', now()
             FROM generate_series(0, $4::int - 1) i,
                  LATERAL (SELECT date_trunc('minute', $3::timestamptz) + make_interval(secs => i % 60) AS base) b,
                  LATERAL (SELECT CASE WHEN b.base < $3::timestamptz THEN b.base + interval '1 minute' ELSE b.base END AS at) t
           RETURNING id, next_run_at
         )
         SELECT count(*) FROM (
           SELECT graphile_worker.add_job('schedules__tick',
                    json_build_object('scheduleId', id, 'at', to_char(next_run_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
                    run_at := next_run_at AT TIME ZONE 'UTC', job_key := 'sch:' || id, max_attempts := 10)
             FROM s) x`,
        [ctx.projectId, webhook.id, start, SCHEDULES],
      );
      ctx.log(`${SCHEDULES} schedules planned from ${start.toISOString()}; measuring ${WINDOW_SECONDS} s`);
      const fired = async () =>
        Number((await db.query(`SELECT count(*) AS n FROM schedules WHERE webhook_id = $1 AND last_run_at IS NOT NULL`, [webhook.id])).rows[0].n);
      while (Date.now() < end.getTime() + 5_000) {
        await new Promise((r) => setTimeout(r, 15_000));
        ctx.log(`${await fired()} schedules have fired`);
      }
      await db.query(`UPDATE schedules SET enabled = false, next_run_at = NULL WHERE webhook_id = $1`, [webhook.id]);
      await db.query(`SELECT graphile_worker.remove_job('sch:' || id) FROM schedules WHERE webhook_id = $1`, [webhook.id]);
      ctx.log('schedules disabled; reading the ticks');
      const { rows } = await db.query<{ ms: number; tick: string; sid: string }>(
        `SELECT extract(epoch FROM (received_at AT TIME ZONE 'UTC') - (headers->>'x-schedule-tick')::timestamptz) * 1000 AS ms,
                headers->>'x-schedule-tick' AS tick, headers->>'x-schedule-id' AS sid
           FROM events WHERE webhook_id = $1 AND (headers->>'x-schedule-tick')::timestamptz >= $2 AND (headers->>'x-schedule-tick')::timestamptz < $3`,
        [webhook.id, start, end],
      );
      const drift = rows.map((r) => Number(r.ms)).sort((a, b) => a - b);
      const distinct = new Set(rows.map((r) => `${r.sid} ${r.tick}`)).size;
      const expected = SCHEDULES * (WINDOW_SECONDS / 60);
      const over1s = drift.filter((d) => d > 1000).length;
      return [
        {
          name: 'schedules-drift',
          throughput: rows.length / WINDOW_SECONDS,
          unit: 'ticks/s',
          p50Ms: percentile(drift, 50),
          p99Ms: percentile(drift, 99),
          requests: rows.length,
          failures: expected - distinct + (rows.length - distinct),
          notes:
            `${rows.length} of ${expected} planned ticks fired in the window (${rows.length - distinct} twice); drift max ${drift[drift.length - 1]?.toFixed(0)} ms, ` +
            `${over1s} over 1 s; ${receiver.firstSeen.size} deliveries received.`,
        },
      ];
    } finally {
      await db.end();
      await receiver.close();
    }
  },
};

export default schedulesDrift;
