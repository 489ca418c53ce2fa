import { makeWorkerUtils, run, type Runner } from 'graphile-worker';
import { createTaskList } from '../jobs/index.ts';
import type { Config } from './config.ts';
import { connectDatabase } from './db/client.ts';
import { PgPubSub } from './db/pubsub.ts';
import { quietLogger, workerLogger } from './db/migrate.ts';
import { createHttpIngestHandler } from './ingest/http-ingest.ts';
import { startHttpServer, type ExtraRoutes, type HttpServer } from './http/server.ts';
import { log } from './log.ts';
import type { Runtime } from './runtime.ts';
import { createOutboundClient, type OutboundClient } from './deliveries/outbound-http.ts';
import { createDeliveryEngine, type DeliveryEngine } from './deliveries/attempt.ts';
import { registerDeliveryRefLoader } from './deliveries/publish.ts';
import { JobRunnerNudge } from './deliveries/enqueue.ts';
import { startDeliverySweeper } from './deliveries/sweep.ts';
import { API_KEYS_TOPIC, forgetCachedKeys } from './projects/service.ts';

async function watchKeyRevocations(rt: Runtime) {
  for await (const _ of rt.pubsub.subscribe(API_KEYS_TOPIC)) forgetCachedKeys(rt);
}

export interface AppOptions {
  config: Config;
  databaseUrl: string;
  api?: boolean;
  worker?: boolean;
  /** Overrides config.PORT (0 picks a free port). */
  port?: number;
}

export interface App {
  rt: Runtime;
  http?: HttpServer;
  runner?: Runner;
  stop(): Promise<void>;
}

/** Starts the API half (HTTP + WebSocket), the worker half (graphile-worker runner), or both. */
export async function startApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const db = connectDatabase(opts.databaseUrl, config.DATABASE_POOL_SIZE);
  const pubsub = new PgPubSub(opts.databaseUrl, db.pool);
  const workerUtils = await makeWorkerUtils({ pgPool: db.pool, logger: quietLogger });
  const rt: Runtime = { config, db, pubsub, workerUtils, runners: new JobRunnerNudge(db.relaxedPool) };

  let http: HttpServer | undefined;
  let runner: Runner | undefined;
  let outbound: OutboundClient | undefined;
  let engine: DeliveryEngine | undefined;
  let sweeper: { stop(): void } | undefined;
  let stopRequested = false;
  registerDeliveryRefLoader(rt);
  if (opts.api !== false) {
    await pubsub.start();
    void watchKeyRevocations(rt);
    const extraRoutes: ExtraRoutes = { '/i': createHttpIngestHandler(rt) };
    http = await startHttpServer(rt, { port: opts.port ?? config.PORT, host: config.HOST, extraRoutes });
    log.info({ port: http.port }, 'http server listening');
  }
  if (opts.worker !== false) {
    outbound = createOutboundClient({ allowPrivate: config.ALLOW_PRIVATE_DESTINATIONS });
    engine = createDeliveryEngine(rt, outbound);
    runner = await run({
      pgPool: db.relaxedPool,
      concurrency: config.WORKER_CONCURRENCY,
      taskList: createTaskList(rt, engine),
      noHandleSignals: true,
      logger: workerLogger(log),
      // One fetch per runner fills a local queue, so polling often for due jobs stays cheap.
      preset: {
        worker: {
          pollInterval: config.WORKER_POLL_INTERVAL_MS,
          localQueue: { size: config.WORKER_CONCURRENCY },
          completeJobBatchDelay: config.WORKER_COMPLETE_BATCH_MS,
        },
      },
    });
    // graphile-worker stops its pool for good after repeated failures to complete jobs (a long
    // database outage): a process whose runner is gone must not live on as if it ran jobs.
    const started = runner;
    void started.promise
      .then(() => null, (err: unknown) => err)
      .then((err) => {
        if (stopRequested) return;
        log.fatal({ err }, 'the job runner stopped on its own; exiting so that the supervisor restarts this process');
        process.exit(1);
      });
    sweeper = startDeliverySweeper(rt);
    log.info({ concurrency: config.WORKER_CONCURRENCY }, 'job runner started');
  }

  let stopping: Promise<void> | undefined;
  return {
    rt,
    http,
    runner,
    stop() {
      stopRequested = true;
      stopping ??= (async () => {
        await http?.close(config.SHUTDOWN_TIMEOUT_MS);
        sweeper?.stop();
        await runner?.stop();
        outbound?.close();
        await engine?.senders.close();
        await pubsub.close();
        await workerUtils.release();
        await db.close();
      })();
      return stopping;
    },
  };
}
