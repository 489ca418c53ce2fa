import type pg from 'pg';
import { BatchWriter } from '../db/batch-writer.ts';
import { log } from '../log.ts';

/** One run's record and what it adds to the project's monthly usage. */
export interface RunRecord {
  id: string;
  projectId: string;
  automationId: string;
  version: number;
  deliveryId: string | null;
  status: string;
  cpuMs: number;
  subrequests: number;
  logs: string;
  logBytes: number;
  logsTruncated: boolean;
  error: string | null;
}

/**
 * The runs' records (automation_runs) and their usage (usage_counters: runs, CPU ms,
 * subrequests, log bytes this month, summed per project), for a whole batch in one statement.
 * A run of an automation deleted meanwhile is not recorded (its record would have no owner),
 * and does not fail the others.
 */
const RECORD_SQL = `WITH r AS (
       SELECT * FROM json_to_recordset($1::json)
         AS r(id text, project_id text, automation_id text, version int, delivery_id text, status text, cpu_ms float8,
              subrequests int, logs text, log_bytes int, logs_truncated bool, error text)
     ), run AS (
       INSERT INTO automation_runs (id, project_id, automation_id, version, delivery_id, status, cpu_ms, subrequests, logs, log_bytes, logs_truncated, error)
       SELECT r.id, r.project_id, r.automation_id, r.version, r.delivery_id, r.status, r.cpu_ms, r.subrequests, r.logs, r.log_bytes, r.logs_truncated, r.error
         FROM r JOIN automations a ON a.id = r.automation_id
       ON CONFLICT (id) DO NOTHING
     )
     INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
     SELECT r.project_id, '', m.metric, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), usage_counter_shard(), sum(m.n)::bigint
       FROM r CROSS JOIN LATERAL (VALUES ('automation_runs', 1::bigint), ('automation_cpu_ms', ceil(r.cpu_ms)::bigint),
                                         ('automation_subrequests', r.subrequests::bigint), ('automation_log_bytes', r.log_bytes::bigint)) AS m(metric, n)
      GROUP BY r.project_id, m.metric
     ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value`;

const clean = (text: string) => (text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text).toWellFormed();

export async function writeRunRecords(db: pg.Pool | pg.PoolClient, records: RunRecord[]): Promise<void> {
  if (records.length === 0) return;
  const rows = records.map((r) => ({
    id: r.id,
    project_id: r.projectId,
    automation_id: r.automationId,
    version: r.version,
    delivery_id: r.deliveryId,
    status: r.status,
    cpu_ms: r.cpuMs,
    subrequests: r.subrequests,
    logs: clean(r.logs),
    log_bytes: r.logBytes,
    logs_truncated: r.logsTruncated,
    error: r.error === null ? null : clean(r.error),
  }));
  await db.query({ name: 'automation_run_records', text: RECORD_SQL, values: [JSON.stringify(rows)] });
}

/**
 * Gathers the records of runs finishing at about the same time in this process into one
 * statement (a BatchWriter, as AttemptRecorder does for attempts): under load many runs share a
 * round trip and alone each is written at once. While the database is away the records wait (up
 * to 30 s) and are written when it is back. record() resolves once the run's record is written;
 * it rejects when it could not be. A batch the database refuses is written again one record at a
 * time, so one record it refuses loses no other.
 */
export class RunRecorder {
  private readonly writer: BatchWriter<RunRecord, void>;

  constructor(db: pg.Pool, maxBatch = 200) {
    this.writer = new BatchWriter(
      async (records) => {
        await writeRunRecords(db, records);
        return records.map(() => undefined);
      },
      {
        maxBatch,
        onRefused: async (records, err) => {
          if (records.length === 1) return [{ status: 'rejected', reason: err }];
          log.warn({ err }, 'a batch of automation run records failed; writing them one by one');
          const settled: PromiseSettledResult<void>[] = [];
          for (const r of records) settled.push(...(await Promise.allSettled([writeRunRecords(db, [r])])));
          return settled;
        },
      },
    );
  }

  record(record: RunRecord): Promise<void> {
    return this.writer.add(record);
  }
}
