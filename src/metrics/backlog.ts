import type { Runtime } from '../runtime.ts';

export const BACKLOG_SAMPLE_TASK = 'metrics__sample_backlog';
/** graphile-worker's crontab line: once a minute (its finest step), one job at a time. */
export const BACKLOG_SAMPLE_CRONTAB = `* * * * * ${BACKLOG_SAMPLE_TASK} ?jobKey=metrics_sample_backlog&jobKeyMode=preserve_run_at&max=1`;

/**
 * Samples every webhook's backlog depth (the usage counters' `backlog_depth`, the sum of its
 * shards: no scan of deliveries) into sample buckets of each answer bucket size (60, 900, 7200, 21600 s), keeping the highest
 * depth seen in each. A webhook with nothing pending writes no row (its series reads 0).
 */
export async function sampleBacklog(rt: Pick<Runtime, 'db'>): Promise<number> {
  const { rowCount } = await rt.db.pool.query({
    name: 'backlog_sample',
    text: `INSERT INTO webhook_backlog_samples AS b (webhook_id, size, bucket_start, project_id, depth)
           SELECT c.webhook_id, s.size, metrics_bucket(now(), s.size), c.project_id, c.depth
             FROM (SELECT u.project_id, u.webhook_id, sum(u.value) AS depth FROM usage_counters u
                    WHERE u.metric = 'backlog_depth' AND u.period = 'current' AND u.webhook_id <> ''
                    GROUP BY 1, 2 HAVING sum(u.value) > 0) c
             JOIN webhooks w ON w.id = c.webhook_id
            CROSS JOIN (VALUES (60), (900), (7200), (21600)) AS s(size)
            ORDER BY 1, 2
           ON CONFLICT (webhook_id, size, bucket_start) DO UPDATE SET depth = GREATEST(b.depth, excluded.depth)`,
  });
  return (rowCount ?? 0) / 4;
}
