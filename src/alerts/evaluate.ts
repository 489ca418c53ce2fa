import type pg from 'pg';
import { inTransaction } from '../db/client.ts';
import { decryptSecret } from '../encryption.ts';
import { createOutboundClient, type OutboundClient } from '../outbound/http-client.ts';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { sendAlert, type AlertMessage, type ChannelResult } from './channels.ts';
import type { AlertChannel, ConditionType } from './rules.ts';
import { STREAK_SQL } from '../metrics/rollup.ts';

/** The message a dispatch job carries (its task's payload). */
export type { AlertMessage };

export const ALERTS_TASK = 'alerts__evaluate';
/** One dispatch's channels, sent in a job of its own (retried): never inline in the evaluation. */
export const ALERT_DISPATCH_TASK = 'alerts__dispatch';
const DISPATCH_MAX_ATTEMPTS = 5;
/**
 * graphile-worker's crontab line, once a minute (its finest step), keeps the evaluation planned;
 * each run plans the next ALERT_EVAL_INTERVAL_MS later (default 30 s) under the same job key.
 */
export const ALERTS_CRONTAB = `* * * * * ${ALERTS_TASK} ?jobKey=alerts_evaluate&jobKeyMode=preserve_run_at&max=1`;
const LOCK_KEY = 727_017;

interface RuleRow {
  id: string;
  project_id: string;
  name: string;
  webhook_id: string | null;
  condition_type: ConditionType;
  threshold: number;
  window_seconds: number;
  channels: AlertChannel[];
  cooldown_seconds: number;
  secret_enc: string;
  state: string;
  last_fired_at: Date | null;
}

/** The condition's value now, from the roll-ups and counters (never raw deliveries), and the webhook it is worst on. */
async function measure(db: pg.Pool, r: RuleRow): Promise<{ value: number; holds: boolean; webhookId: string | null }> {
  const scope = [r.project_id, r.webhook_id];
  switch (r.condition_type) {
    case 'failure_rate': {
      const { rows } = await db.query<{ webhook_id: string; f: string; s: string }>(
        `SELECT webhook_id, sum(failed) AS f, sum(succeeded) AS s FROM webhook_metric_buckets
          WHERE project_id = $1 AND ($2::text IS NULL OR webhook_id = $2) AND size = 60 AND bucket_start > now() - make_interval(secs => $3)
          GROUP BY webhook_id HAVING sum(failed) + sum(succeeded) > 0`,
        [...scope, r.window_seconds],
      );
      let worst = { value: 0, webhookId: r.webhook_id, finished: false };
      for (const row of rows) {
        const rate = Number(row.f) / (Number(row.f) + Number(row.s));
        if (!worst.finished || rate > worst.value) worst = { value: rate, webhookId: row.webhook_id, finished: true };
      }
      return { value: Math.round(worst.value * 10_000) / 10_000, holds: worst.finished && worst.value >= r.threshold, webhookId: worst.webhookId };
    }
    case 'dlq_added': {
      const { rows } = await db.query<{ n: string }>(
        `SELECT coalesce(sum(failed), 0) AS n FROM webhook_metric_buckets
          WHERE project_id = $1 AND ($2::text IS NULL OR webhook_id = $2) AND size = 60 AND bucket_start > now() - make_interval(secs => $3)`,
        [...scope, r.window_seconds],
      );
      const value = Number(rows[0].n);
      return { value, holds: value > 0 && value >= r.threshold, webhookId: r.webhook_id };
    }
    case 'consecutive_failures': {
      const { rows } = await db.query<{ webhook_id: string; streak: number }>(
        `SELECT webhook_id, ${STREAK_SQL('streak')} AS streak FROM webhook_failure_streaks
          WHERE project_id = $1 AND ($2::text IS NULL OR webhook_id = $2) ORDER BY 2 DESC LIMIT 1`,
        scope,
      );
      const value = rows[0]?.streak ?? 0;
      return { value, holds: value > 0 && value >= r.threshold, webhookId: r.webhook_id ?? rows[0]?.webhook_id ?? null };
    }
    case 'backlog_depth': {
      const { rows } = await db.query<{ n: string }>(
        `SELECT coalesce(sum(value), 0) AS n FROM usage_counters WHERE project_id = $1 AND webhook_id = coalesce($2::text, '') AND metric = 'backlog_depth' AND period = 'current'`,
        scope,
      );
      const value = Number(rows[0].n);
      return { value, holds: value > 0 && value >= r.threshold, webhookId: r.webhook_id };
    }
  }
}

let sharedClient: OutboundClient | undefined;

export interface EvaluationReport {
  ran: boolean;
  evaluated: number;
  fired: number;
  resolved: number;
}

/**
 * Evaluates every enabled rule once (one evaluation at a time across processes: an advisory
 * lock). A rule fires when its condition holds and it is not firing, at most once per
 * cooldown (from its last firing); it resolves when the condition no longer holds. Each firing
 * and resolution is one dispatch row, written with the rule's new state and its send job
 * (ALERT_DISPATCH_TASK) in one transaction: the channels are sent by that job, out of the
 * evaluation and its lock, so a slow channel delays no other rule and a crash leaves a job
 * to retry, never a dispatch pending for good.
 */
export async function evaluateAlerts(rt: Pick<Runtime, 'db' | 'config'>): Promise<EvaluationReport> {
  const report: EvaluationReport = { ran: false, evaluated: 0, fired: 0, resolved: 0 };
  const db = rt.db.pool;
  // A session-level lock held across statements: on the server itself, never through a pooler.
  const lock = await rt.db.direct.connect();
  try {
    const { rows } = await lock.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [LOCK_KEY]);
    if (!rows[0].ok) return report;
    report.ran = true;
    try {
      const { rows: rules } = await db.query<RuleRow>(
        `SELECT r.id, r.project_id, r.name, r.webhook_id, r.condition_type, r.threshold, r.window_seconds, r.channels, r.cooldown_seconds, r.secret_enc, r.state, r.last_fired_at
           FROM alert_rules r WHERE r.enabled ORDER BY r.id`,
      );
      for (const rule of rules) {
        report.evaluated++;
        try {
          const outcome = await evaluateRule(rt, rule);
          if (outcome === 'firing') report.fired++;
          if (outcome === 'resolved') report.resolved++;
        } catch (err) {
          log.warn({ err, ruleId: rule.id }, 'alert rule evaluation failed');
        }
      }
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
    }
  } finally {
    lock.release();
  }
  return report;
}

async function evaluateRule(rt: Pick<Runtime, 'db' | 'config'>, rule: RuleRow): Promise<'firing' | 'resolved' | null> {
  const m = await measure(rt.db.pool, rule);
  const now = new Date();
  let state: 'firing' | 'resolved' | null = null;
  if (m.holds && rule.state !== 'firing' && (!rule.last_fired_at || now.getTime() - rule.last_fired_at.getTime() >= rule.cooldown_seconds * 1000)) state = 'firing';
  if (!m.holds && rule.state === 'firing') state = 'resolved';
  if (!state) {
    await rt.db.pool.query('UPDATE alert_rules SET last_value = $2, last_evaluated_at = now() WHERE id = $1', [rule.id, m.value]);
    return null;
  }
  const dispatchId = newId('ald');
  const pending = rule.channels.map((c) => ({ type: c.type, target: c.type === 'email' ? c.to : c.url, status: 'pending', error: null }));
  const message: AlertMessage = {
    type: state === 'firing' ? 'alert.firing' : 'alert.resolved',
    ruleId: rule.id,
    dispatchId,
    webhookId: m.webhookId,
    value: m.value,
    threshold: rule.threshold,
    occurredAt: now.toISOString(),
  };
  const written = await inTransaction(rt.db.pool, async (tx) => {
    // The rule as it is now: edited, deleted or already moved on by another evaluation, it is left alone.
    const { rows } = await tx.query<{ state: string }>('SELECT state FROM alert_rules WHERE id = $1 AND enabled FOR UPDATE', [rule.id]);
    if (!rows[0] || rows[0].state !== rule.state) return false;
    await tx.query(
      `UPDATE alert_rules SET state = $2, last_value = $3, last_evaluated_at = now(), last_fired_at = CASE WHEN $2 = 'firing' THEN now() ELSE last_fired_at END WHERE id = $1`,
      [rule.id, state === 'firing' ? 'firing' : 'ok', m.value],
    );
    await tx.query('INSERT INTO alert_dispatches (id, project_id, rule_id, state, value, channels, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      dispatchId,
      rule.project_id,
      rule.id,
      state,
      m.value,
      JSON.stringify(pending),
      now,
    ]);
    await tx.query(`SELECT graphile_worker.add_job($1, $2::json, max_attempts := $3, job_key := 'alert_dispatch:' || $4)`, [
      ALERT_DISPATCH_TASK,
      JSON.stringify({ dispatchId, message }),
      DISPATCH_MAX_ATTEMPTS,
      dispatchId,
    ]);
    return true;
  });
  return written ? state : null;
}

/**
 * The dispatch job: sends the message to the dispatch's channels not yet sent (the targets
 * written with it, signed with the rule's current secret) and writes each outcome to the row.
 * A channel that failed (after its own ALERT_WEBHOOK_TRIES) fails the job, which
 * graphile-worker retries with backoff (up to 5 runs), sending only the channels still failed.
 * A dispatch whose rule was deleted meanwhile is gone with it: nothing to send.
 */
export async function sendAlertDispatch(rt: Pick<Runtime, 'db' | 'config'>, dispatchId: string, message: AlertMessage, client?: OutboundClient): Promise<void> {
  client ??= sharedClient ??= createOutboundClient({ allowPrivate: rt.config.ALLOW_PRIVATE_DESTINATIONS, maxSockets: 16 });
  const { rows } = await rt.db.pool.query<{ channels: ChannelResult[]; name: string; condition_type: string; secret_enc: string }>(
    'SELECT d.channels, r.name, r.condition_type, r.secret_enc FROM alert_dispatches d JOIN alert_rules r ON r.id = d.rule_id WHERE d.id = $1',
    [dispatchId],
  );
  if (!rows[0]) return;
  const current = rows[0].channels;
  const todo = current.map((c, i) => ({ c, i })).filter((x) => x.c.status !== 'sent');
  if (todo.length === 0) return;
  const channels: AlertChannel[] = todo.map(({ c }) => (c.type === 'email' ? { type: 'email', to: c.target } : { type: 'webhook', url: c.target }) as AlertChannel);
  const results = await sendAlert(rt, client, { name: rows[0].name, conditionType: rows[0].condition_type, secret: decryptSecret(rows[0].secret_enc), channels }, message);
  const next = [...current];
  todo.forEach((x, k) => (next[x.i] = results[k]));
  await rt.db.pool.query('UPDATE alert_dispatches SET channels = $2 WHERE id = $1', [dispatchId, JSON.stringify(next)]);
  const failed = results.filter((r) => r.status === 'failed');
  if (failed.length > 0) throw new Error(`alert dispatch ${dispatchId}: ${failed.length} channel(s) failed: ${failed.map((f) => f.error).join('; ')}`);
}

/** The job body: one evaluation, then the next planned ALERT_EVAL_INTERVAL_MS later. */
export async function runAlertEvaluation(rt: Pick<Runtime, 'db' | 'config'>): Promise<void> {
  try {
    await evaluateAlerts(rt);
  } finally {
    await rt.db.pool.query(
      `SELECT graphile_worker.add_job($1, '{}'::json, run_at := now() + make_interval(secs => $2), job_key := 'alerts_evaluate', job_key_mode := 'replace', max_attempts := 1)`,
      [ALERTS_TASK, rt.config.ALERT_EVAL_INTERVAL_MS / 1000],
    );
  }
}
