import type pg from 'pg';
import { decodeTime } from 'ulid';
import { analyzeNeverAnalyzed } from '../db/migrate.ts';
import { log } from '../log.ts';
import { projectQuotas } from '../projects/quotas/limits.ts';

/**
 * Time-partitioned history (CONTRACT §14, docs/scaling.md). The history tables whose primary key is
 * their ULID id alone (events, deliveries, replay_jobs, automation_runs, audit_logs,
 * alert_dispatches) are range-partitioned on that id, one partition per UTC day
 * (`<table>_pYYYYMMDD`), plus `<table>_p0` (everything before the partitioning migration's next
 * day) and `<table>_default` (an insert past the days created ahead lands there: it never fails).
 * delivery_attempts and dlq_entries follow deliveries: range-partitioned on delivery_id with the
 * deliveries' bounds and names, so a delivery's attempts and DLQ entry are in its day.
 *
 * The partition job (`history__partitions`, hourly and once when a runner starts) creates today and
 * the next days ahead; the migration's `history_partitions_ensure` does the work under an advisory
 * lock, and a partition another runner made meanwhile is no error.
 *
 * Retention drops a whole day once it is older than the longest history retention of any project
 * (a webhook's overrides only tighten its project's), after checking what row deletes would have
 * kept: no unfinished delivery or running replay job in it, no delivery left pointing at one of its
 * events. A deliveries day goes with its attempts' and DLQ entries' day. The batched deletes go on
 * inside the partitions still needed.
 */

export const PARTITION_TASK = 'history__partitions';
/** graphile-worker's crontab line: every hour, one job at a time. */
export const PARTITION_CRONTAB = `41 * * * * ${PARTITION_TASK} ?jobKey=history_partitions&jobKeyMode=preserve_run_at&max=1`;
/** Days created from today on: today and 4 ahead (the contract asks for at least 3). */
export const PARTITION_DAYS = 5;

export interface HistoryTable {
  table: string;
  /** The prefix of the ids it is partitioned on. */
  prefix: string;
  /** The table whose days this one shares (bounds and names): they are created and dropped together. */
  follows?: string;
}

/** The partitioned tables (the migrations' history_partitioned_tables()), in the order retention drops their days (referencing before referenced). */
export const HISTORY_PARTITIONED: readonly HistoryTable[] = [
  { table: 'deliveries', prefix: 'del' },
  { table: 'delivery_attempts', prefix: 'del', follows: 'deliveries' },
  { table: 'dlq_entries', prefix: 'del', follows: 'deliveries' },
  { table: 'events', prefix: 'evt' },
  { table: 'replay_jobs', prefix: 'rpl' },
  { table: 'automation_runs', prefix: 'run' },
  { table: 'audit_logs', prefix: 'aud' },
  { table: 'alert_dispatches', prefix: 'ald' },
];

/** Whether `table`'s days are another table's (created and dropped with them: never dropped on their own). */
export const followsAnother = (table: string) => HISTORY_PARTITIONED.some((t) => t.table === table && t.follows);

/** The partitions a drop of `p` takes: `p`, then the same day of each table that follows its table. */
export function droppedWith(p: Pick<HistoryPartition, 'table' | 'name'>): { table: string; name: string }[] {
  const day = p.name.slice(p.table.length);
  return [p, ...HISTORY_PARTITIONED.filter((t) => t.follows === p.table).map((t) => ({ table: t.table, name: t.table + day }))];
}

const ACTIVE = `('queued', 'scheduled', 'delivering', 'retrying')`;

/** Creates the days from `now`'s (UTC) on that do not exist yet; returns the partitions made. */
export async function ensureHistoryPartitions(db: pg.Pool, now: Date = new Date(), days = PARTITION_DAYS): Promise<string[]> {
  const { rows } = await db.query<{ p: string }>('SELECT history_partitions_ensure($1::date, $2) AS p', [now.toISOString().slice(0, 10), days]);
  const made = rows.map((r) => r.p);
  if (made.length) {
    log.info({ partitions: made }, 'history partitions created');
    // Empty, analyzed now: the day's first rows are planned with estimates that grow with them.
    await analyzeNeverAnalyzed(db, made);
  }
  return made;
}

export interface HistoryPartition {
  table: string;
  prefix: string;
  name: string;
  /** Lowest id it holds ('' for the first partition, from MINVALUE). */
  from: string;
  /** Ids below this. */
  to: string;
  /** Creation time (ms) of its last possible row: the start of its next day. */
  endsAt: number;
}

/** Every range partition of the history tables (not the default ones), oldest first per table; those of a table that follows another too. */
export async function listHistoryPartitions(db: pg.Pool): Promise<HistoryPartition[]> {
  const { rows } = await db.query<{ parent: string; name: string; bound: string }>(
    `SELECT p.relname AS parent, c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
      WHERE p.relname = ANY ($1) AND p.relnamespace = 'public'::regnamespace`,
    [HISTORY_PARTITIONED.map((t) => t.table)],
  );
  const out: HistoryPartition[] = [];
  for (const r of rows) {
    const m = /FROM \((MINVALUE|'([^']*)')\) TO \('([^']*)'\)/.exec(r.bound);
    if (!m) continue; // DEFAULT
    const { prefix } = HISTORY_PARTITIONED.find((t) => t.table === r.parent)!;
    const to = m[3];
    out.push({ table: r.parent, prefix, name: r.name, from: m[2] ?? '', to, endsAt: decodeTime(to.slice(prefix.length + 1).toUpperCase().padEnd(26, '0')) });
  }
  return out.sort((a, b) => (a.table === b.table ? a.to.localeCompare(b.to) : 0));
}

/** The longest history retention (seconds) of any project: a day older than that is nobody's. */
export async function longestHistoryRetention(db: pg.Pool): Promise<number> {
  const { rows } = await db.query<{ tier: string; custom_quotas: unknown }>('SELECT DISTINCT tier, custom_quotas FROM projects');
  return Math.max(0, ...rows.map((p) => projectQuotas({ tier: p.tier, customQuotas: p.custom_quotas }).history_retention_seconds));
}

export interface DropOptions {
  now: number;
  deadline: number;
  /** How long a drop waits for each lock before leaving the day to the next pass (default 500 ms). */
  lockTimeout?: string;
}

export interface DropReport {
  dropped: string[];
  /** Partitions past every retention but kept: an unfinished row, or a row elsewhere still pointing in. */
  kept: string[];
}

/** Drops every history partition whose whole day is older than the longest history retention (dropHistoryPartition). */
export async function dropExpiredPartitions(db: pg.Pool, opts: DropOptions): Promise<DropReport> {
  const report: DropReport = { dropped: [], kept: [] };
  const cutoff = opts.now - (await longestHistoryRetention(db)) * 1000;
  const parts = (await listHistoryPartitions(db)).filter((p) => p.endsAt <= cutoff && !followsAnother(p.table));
  const order = HISTORY_PARTITIONED.map((t) => t.table);
  parts.sort((a, b) => order.indexOf(a.table) - order.indexOf(b.table) || a.to.localeCompare(b.to));
  for (const p of parts) {
    if (Date.now() > opts.deadline) break;
    (await dropHistoryPartition(db, p, opts)) ? report.dropped.push(...droppedWith(p).map((d) => d.name)) : report.kept.push(p.name);
  }
  if (report.dropped.length) log.info({ dropped: report.dropped }, 'history partitions dropped');
  return report;
}

/**
 * Drops one partition, with the same day of the tables that follow its table (droppedWith: a
 * deliveries day takes its attempts and DLQ entries), unless something a row delete would keep is
 * in it (then false). Events' payload counters go down (stored_payload_bytes) before their day goes.
 */
export async function dropHistoryPartition(db: pg.Pool, p: HistoryPartition, opts: Pick<DropOptions, 'lockTimeout'>): Promise<boolean> {
  const range = [p.from, p.to];
  if (await blocker(db, p)) return false;
  if (p.table === 'events') {
    // Bodies still held are counted down by the events' update trigger, as payload retention would.
    await db.query(
      `UPDATE events SET body = NULL, source_body = NULL, payload_purged_at = coalesce(payload_purged_at, now())
        WHERE id >= $1 AND id < $2 AND (body IS NOT NULL OR source_body IS NOT NULL)`,
      range,
    );
  }
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    // Every lock the detach and drop take, at once and in the order the hot paths take them (ingest:
    // events, then deliveries; results: deliveries, then attempts and DLQ entries), each waited for at most
    // lock_timeout, below PostgreSQL's deadlock_timeout (1 s): when a writer and the drop do wait on
    // each other, the drop gives up first and the writer goes on. Retention tries again next pass.
    await client.query(`SELECT set_config('lock_timeout', $1, true)`, [opts.lockTimeout ?? '500ms']);
    for (const lock of LOCKS[p.table] ?? [`${p.table} IN ACCESS EXCLUSIVE MODE`]) await client.query(`LOCK TABLE ${lock}`);
    // The following days first (a day of deliveries goes after its attempts), each detached first:
    // that checks no row elsewhere references it and takes its foreign keys' parts off. A following
    // day that does not exist is skipped.
    const [own, ...following] = droppedWith(p);
    const { rows } = await client.query<{ name: string }>('SELECT name FROM unnest($1::text[]) AS name WHERE to_regclass(name) IS NOT NULL', [following.map((f) => f.name)]);
    for (const d of [...following.filter((f) => rows.some((r) => r.name === f.name)), own]) {
      await client.query(`ALTER TABLE ${d.table} DETACH PARTITION ${d.name}`);
      await client.query(`DROP TABLE ${d.name}`);
    }
    await client.query('COMMIT');
    return true;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    log.warn({ err: (err as Error).message, partition: p.name }, 'history partition not dropped; the next pass tries again');
    return false;
  } finally {
    client.release();
  }
}

/**
 * The locks a day's detach takes, in the hot paths' order (ingest: events, then deliveries; results:
 * deliveries, then attempts and DLQ entries). Foreign keys: deliveries → events, delivery_attempts → deliveries.
 */
const LOCKS: Record<string, string[]> = {
  deliveries: ['events IN SHARE ROW EXCLUSIVE MODE', 'deliveries IN ACCESS EXCLUSIVE MODE', 'delivery_attempts IN ACCESS EXCLUSIVE MODE', 'dlq_entries IN ACCESS EXCLUSIVE MODE'],
  events: ['events IN ACCESS EXCLUSIVE MODE', 'deliveries IN SHARE ROW EXCLUSIVE MODE'],
};

/** Why a partition past every retention must stay, or null. */
async function blocker(db: pg.Pool, p: HistoryPartition): Promise<string | null> {
  const check = async (sql: string, values: unknown[] = []) => (await db.query(sql, values)).rows.length > 0;
  if (p.table === 'deliveries' && (await check(`SELECT 1 FROM ${p.name} WHERE status IN ${ACTIVE} LIMIT 1`))) return 'unfinished deliveries';
  if (p.table === 'events' && (await check('SELECT 1 FROM deliveries WHERE event_id >= $1 AND event_id < $2 LIMIT 1', [p.from, p.to]))) return 'deliveries left';
  if (p.table === 'replay_jobs' && (await check(`SELECT 1 FROM ${p.name} WHERE status IN ('queued', 'running') LIMIT 1`))) return 'replay jobs running';
  return null;
}
