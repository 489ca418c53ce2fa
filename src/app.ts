import { EventEmitter } from 'node:events';
import { makeWorkerUtils, run, type Runner, type Task, type WorkerEvents } from 'graphile-worker';
import { beforeRunnerStart, createTaskList, CRONTAB } from '../jobs/index.ts';
import { startTracing, tracingEnabled, withSpan } from './tracing.ts';
import type { Config } from './config.ts';
import { connectDatabase, poolForJobRunner } from './db/client.ts';
import { PgPubSub } from './db/pubsub.ts';
import { quietLogger, workerLogger } from './db/migrate.ts';
import { ingestRoutes, startIngestServers, type ChannelServer } from './ingest/channels.ts';
import { watchIngestTargetChanges } from './ingest/ingest-target-cache.ts';
import { createSignedFileHandler } from './http/files.ts';
import { createDashboardHandler } from './http/dashboard.ts';
import { startHttpServer, type ExtraRoutes, type HttpServer } from './http/server.ts';
import { closeFileStore } from './files/store.ts';
import { log } from './log.ts';
import type { Runtime } from './runtime.ts';
import { claimForDrain, createDeliveryEngine, drainRunning, handOverToDrain, stopDrains, type DeliveryEngine } from './deliveries/engine.ts';
import { registerDeliveryRefLoader } from './deliveries/notify.ts';
import { JobRunnerNudge } from './deliveries/enqueue.ts';
import { startDeliverySweeper } from './deliveries/sweep.ts';
import { ATTEMPT_INTERRUPTED } from './deliveries/send-attempt.ts';
import { API_KEYS_TOPIC, forgetCachedKeys } from './projects/service.ts';
import { jobStartDelay, watchDatabase } from './prom.ts';
import { startMetricsServer } from './http/metrics.ts';
import { flushIngestCounts } from './metrics/ingest-counts.ts';
import { startDrainScheduler } from './drains/send.ts';
import { stopSignalledAt } from './stop-signal.ts';

async function watchKeyRevocations(rt: Runtime) {
  for await (const _ of rt.pubsub.subscribe(API_KEYS_TOPIC)) forgetCachedKeys(rt);
}

export interface AppOptions {
  config: Config;
  databaseUrl: string;
  /** The server itself when `databaseUrl` goes through a transaction pooler (DATABASE_DIRECT_URL): LISTEN, session locks, the job runner. Default: databaseUrl. */
  directUrl?: string;
  api?: boolean;
  worker?: boolean;
  /** Overrides config.PORT (0 picks a free port). */
  port?: number;
  /** Overrides config.SMTP_PORT (0 picks a free port). */
  smtpPort?: number;
}

export interface App {
  rt: Runtime;
  http?: HttpServer;
  /** Email ingest's SMTP server (with the API half). */
  smtp?: ChannelServer;
  /** A worker-only process's /metrics server (METRICS_PORT). */
  metricsPort?: number;
  runner?: Runner;
  stop(): Promise<void>;
  /** What a stop under way is waiting for (said should it run out of time). */
  readonly stopStep: string;
}

/**
 * How long app.stop waits at most for its job runner's jobs, and then for its pools to close. A
 * process stops sooner (bootstrap.ts exits 3.5 s after SHUTDOWN_TIMEOUT_MS); these bound the stop
 * of an app running inside another process (tests, the bench), which otherwise waited for ever
 * on a job that did not end or a connection never given back.
 */
const RUNNER_STOP_MS = 20_000;
/** How long a stop lets delivery attempts already open finish before it interrupts them. */
const ATTEMPT_STOP_GRACE_MS = 1_000;
const POOLS_CLOSE_MS = 5_000;

/** Waits for `p` at most `ms`; past that, says what did not stop and goes on (the process ends anyway). */
async function within(p: Promise<unknown> | undefined, ms: number, what: string): Promise<void> {
  if (!p) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((r) => {
    timer = setTimeout(() => r('late'), ms);
    timer.unref();
  });
  const outcome = await Promise.race([p.then(() => 'done' as const), late]).finally(() => clearTimeout(timer));
  if (outcome === 'late') log.warn({ ms }, `${what} did not stop in time; stopping the rest`);
}

/** How long a job runner whose pool hit a fatal error may take to stop before it counts as dead (see runnerDeath). */
const RUNNER_DEAD_AFTER_FATAL_MS = 60_000;

/**
 * Resolves (with the error) once a runner's pool is past saving, whether or not its run promise
 * ever settles: graphile-worker 0.18 can fail to shut a pool down after a fatal error (its local
 * queue refuses to release: "Cannot background something when the queue is already released"),
 * and then its run promise never settles. Dead once its forceful shutdown failed, or
 * `afterFatalMs` after the fatal error. Listen before the runner starts.
 */
export function runnerDeath(events: WorkerEvents, afterFatalMs = RUNNER_DEAD_AFTER_FATAL_MS): Promise<unknown> {
  return new Promise((resolve) => {
    events.once('pool:forcefulShutdown:error', ({ error }) => resolve(error));
    events.once('pool:fatalError', ({ error }) => setTimeout(() => resolve(error), afterFatalMs).unref());
  });
}

/** Starts the API half (HTTP + WebSocket), the worker half (graphile-worker runner), or both. */
export async function startApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  // A runner holds up to WORKER_CONCURRENCY connections of the relaxed pool, plus the drain's claims and the sweeper.
  const relaxedPoolSize = opts.worker !== false ? Math.max(config.DATABASE_POOL_SIZE, config.WORKER_CONCURRENCY + 4) : config.DATABASE_POOL_SIZE;
  const db = connectDatabase(opts.databaseUrl, config.DATABASE_POOL_SIZE, relaxedPoolSize, config.DATABASE_POOL_MIN ?? config.DATABASE_POOL_SIZE, {
    directUrl: opts.directUrl,
    runner: opts.worker !== false,
  });
  // Open before serving: a pool that grows under load starts PostgreSQL backends when it is busiest.
  await db.warm();
  // LISTEN needs a session of its own on the server; NOTIFY goes through the pool like any statement.
  const pubsub = new PgPubSub(db.directUrl, db.pool);
  const workerUtils = await makeWorkerUtils({ pgPool: db.direct, logger: quietLogger });
  const runners = new JobRunnerNudge(db.relaxedPool);
  const rt: Runtime = { config, db, pubsub, workerUtils, runners };

  let http: HttpServer | undefined;
  // The ingest channels' own listeners (email's SMTP server), by channel.
  let channelServers: Record<string, ChannelServer> = {};
  let runner: Runner | undefined;
  // A runner being started again after its pool stopped on its own (superviseRunner).
  let restarting: Promise<void> | undefined;
  let engine: DeliveryEngine | undefined;
  let sweeper: { stop(): void } | undefined;
  let drainScheduler: { stop(): void } | undefined;
  let stopRequested = false;
  let metricsServer: { port: number; close(): Promise<void> } | undefined;
  const unwatch = watchDatabase({ main: db.pool, relaxed: db.relaxedPool });
  const tracing = startTracing(config.OTEL_EXPORTER_OTLP_ENDPOINT, config.OTEL_SERVICE_NAME);
  registerDeliveryRefLoader(rt);
  // Ingest (every channel, cron ticks on the worker half included) keeps webhook lookups only
  // while it hears of every change to them: this listens on both halves.
  const unwatchIngestTargets = watchIngestTargetChanges(rt);
  if (opts.api !== false) {
    await pubsub.start();
    void watchKeyRevocations(rt);
    const extraRoutes: ExtraRoutes = { ...ingestRoutes(rt), '/files': createSignedFileHandler(rt), '/dashboard': createDashboardHandler(rt) };
    http = await startHttpServer(rt, { port: opts.port ?? config.PORT, host: config.HOST, extraRoutes });
    log.info({ port: http.port }, 'http server listening');
    channelServers = await startIngestServers(rt, { email: opts.smtpPort });
  }
  if (opts.worker !== false) {
    engine = createDeliveryEngine(rt);
    const local = engine;
    // Ingest in this process hands due deliveries to the drains running here (no job fetch needed).
    runners.localDrains = {
      running: (webhookId) => drainRunning(local, webhookId),
      offer: (webhookId, deliveryId) => handOverToDrain(local, webhookId, deliveryId),
      claim: (webhookId, configVersion) => claimForDrain(local, webhookId, configVersion),
    };
    // Each task observes its job's start delay (relay_job_start_delay_seconds) before it runs.
    const taskList = Object.fromEntries(
      Object.entries(createTaskList(rt, engine)).map(([task, fn]) => [
        task,
        ((payload, helpers) => {
          jobStartDelay.observe({ task }, Math.max(0, Date.now() - new Date(helpers.job.run_at).getTime()) / 1000);
          if (!tracingEnabled()) return fn!(payload, helpers);
          return withSpan(`job ${task}`, { 'relay.job.id': String(helpers.job.id), 'relay.job.task': task, 'relay.job.attempt': helpers.job.attempts }, () => Promise.resolve(fn!(payload, helpers)));
        }) as Task,
      ]),
    );
    const runnerPool = poolForJobRunner(db.relaxedPool);
    const startRunner = async () => {
      let poolId: string | undefined;
      const events: WorkerEvents = new EventEmitter();
      events.on('pool:create', ({ workerPool }) => (poolId = workerPool.id));
      const dead = runnerDeath(events);
      const started = await run({
        pgPool: runnerPool,
        events,
        concurrency: config.WORKER_CONCURRENCY,
        taskList,
        // The recurring jobs (retention, backlog samples, ...); graphile-worker schedules each minute once across runners.
        crontab: CRONTAB,
        noHandleSignals: true,
        logger: workerLogger(log, () => stopRequested || stopSignalledAt() > 0),
        // One fetch per runner fills a local queue, so polling often for due jobs stays cheap.
        preset: {
          worker: {
            pollInterval: config.WORKER_POLL_INTERVAL_MS,
            localQueue: { size: config.WORKER_CONCURRENCY },
            completeJobBatchDelay: config.WORKER_COMPLETE_BATCH_MS,
            // Batched, a failure to record a failed job stops the pool (and superviseRunner starts
            // a new one); unbatched, graphile-worker leaves its rejection unhandled, which would end
            // the process when the database is away.
            failJobBatchDelay: Math.max(0, config.WORKER_COMPLETE_BATCH_MS),
          },
        },
      });
      superviseRunner(started, () => poolId, dead);
      return started;
    };
    // graphile-worker stops its pool for good when a statement of its own bookkeeping fails
    // (completing a batch of jobs while the database restarts, or a deadlock with a retry being
    // scheduled). The runner is started again once the database answers; the dead pool's jobs are
    // unlocked first (they would otherwise wait hours), and a job that runs twice finds its
    // delivery's state in the row.
    const superviseRunner = (current: Runner, poolId: () => string | undefined, dead: Promise<unknown>) => {
      void Promise.race([current.promise.then(() => null, (err: unknown) => err), dead])
        .then(async (err) => {
          if (stopRequested) return;
          // A runner whose pool never finished shutting down still has its cron: stopped (not awaited).
          void current.stop().catch(() => {});
          log.warn({ err: err instanceof Error ? err.message : err }, 'the job runner stopped on its own; starting a new one once the database answers');
          for (let delay = 100; !stopRequested; delay = Math.min(delay * 2, 2_000)) {
            try {
              await db.relaxedPool.query('SELECT 1');
              const dead = poolId();
              if (dead) await workerUtils.forceUnlockWorkers([dead]);
              if (stopRequested) return;
              const next = startRunner();
              // A stop asked for while it starts finds the dead runner: this one is stopped once started, and stop() waits for that.
              restarting = next.then(
                (started) => (stopRequested ? started.stop().catch(() => {}) : undefined),
                () => {},
              );
              runner = await next;
              if (stopRequested) return;
              log.info('job runner started again');
              return;
            } catch {
              await new Promise((r) => setTimeout(r, delay));
            }
          }
        });
    };
    await beforeRunnerStart(rt);
    runner = await startRunner();
    sweeper = startDeliverySweeper(rt);
    drainScheduler = startDrainScheduler(rt);
    log.info({ concurrency: config.WORKER_CONCURRENCY }, 'job runner started');
    if (!http && config.METRICS_TOKEN && config.METRICS_PORT !== undefined) {
      metricsServer = await startMetricsServer(config.METRICS_TOKEN, config.METRICS_PORT, config.HOST);
      log.info({ port: metricsServer.port }, 'metrics server listening');
    }
  }

  let stopping: Promise<void> | undefined;
  /** What a stop under way is waiting for (said when it runs out of time). */
  let stopStep = 'not stopping';
  return {
    rt,
    http,
    smtp: channelServers.email,
    metricsPort: metricsServer?.port,
    get runner() {
      return runner;
    },
    get stopStep() {
      return stopStep;
    },
    stop() {
      stopRequested = true;
      stopping ??= (async () => {
        // Drains stop claiming at once (graphile-worker's abort signal would come too late).
        runners.localDrains = null;
        if (engine) stopDrains(engine);
        // Attempts still open ATTEMPT_STOP_GRACE_MS into the stop end as interrupted, and any
        // started later at once (always retried: see sendClaimed): their results are recorded and
        // their jobs end, rather than the process waiting up to the webhook's timeout and being cut
        // off with them unrecorded (their deliveries then waited for their claims to run out).
        const cutAttempts = setTimeout(() => {
          const cut = engine?.senders.interrupt(ATTEMPT_INTERRUPTED) ?? 0;
          if (cut > 0) log.info({ attempts: cut }, 'stopping: open delivery attempts interrupted (they are retried)');
        }, ATTEMPT_STOP_GRACE_MS);
        try {
          // The job runner stops taking jobs now, while HTTP drains (up to SHUTDOWN_TIMEOUT_MS).
          // Bounded (RUNNER_STOP_MS): a job that does not end leaves its delivery to its lease
          // (retried, never lost), and the pools below are closed regardless.
          // A runner whose pool stopped on its own is already stopped: graphile-worker refuses a second stop.
          const stopRunner = runner?.stop().catch((err: unknown) => log.debug({ err: err instanceof Error ? err.message : err }, 'the job runner was already stopped'));
          stopStep = 'open HTTP requests and ingest connections';
          await Promise.all([http?.close(config.SHUTDOWN_TIMEOUT_MS), ...Object.values(channelServers).map((s) => s.close())]);
          await metricsServer?.close();
          unwatch();
          unwatchIngestTargets();
          sweeper?.stop();
          drainScheduler?.stop();
          stopStep = restarting ? 'the job runner (being started again)' : 'the job runner';
          await within(Promise.all([stopRunner, restarting]), RUNNER_STOP_MS, 'the job runner');
        } finally {
          clearTimeout(cutAttempts);
        }
        stopStep = 'metrics rollups and ingest counts';
        await engine?.rollups?.stop();
        await flushIngestCounts(rt);
        stopStep = 'outbound connections';
        await engine?.senders.close();
        closeFileStore(config);
        stopStep = 'the pubsub connection and the worker utilities';
        await pubsub.close();
        await workerUtils.release();
        stopStep = 'the database pools';
        await within(db.close(), POOLS_CLOSE_MS, 'the database pools');
        stopStep = 'tracing';
        await tracing.stop();
        stopStep = 'stopped';
      })();
      return stopping;
    },
  };
}
