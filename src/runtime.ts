import type { WorkerUtils } from 'graphile-worker';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import type { PgPubSub } from './db/pubsub.ts';

/** What every service function needs: the database, pub/sub and config of this process. */
export interface Runtime {
  config: Config;
  db: Database;
  pubsub: PgPubSub;
  /** For adding jobs outside a transaction (inside one, use SQL `graphile_worker.add_job`). */
  workerUtils: WorkerUtils;
  /** Wakes job runners after a commit that added jobs without notifying them. */
  runners: RunnerWakeUp;
}

/** Wakes job runners (deliveries/enqueue.ts implements it with one coalesced NOTIFY per process). */
export interface RunnerWakeUp {
  nudge(count?: number): void;
  /**
   * A drain of the webhook runs in this process now (and is not stopping): ingest then writes a
   * due delivery without a job and hands it over (handOver) once it committed.
   */
  drainRunning(webhookId: string): boolean;
  /**
   * Hands a due delivery just committed to its webhook's drain when one runs in this process: the
   * drain claims it (deleting its job, if it has one) without any runner having to be woken.
   * False when none runs here (any more): nudge then, or for a delivery written without a job,
   * queueJobless.
   */
  handOver(webhookId: string, deliveryId: string): boolean;
  /** Gives a delivery written without a job (see drainRunning) its job after all, and wakes the runners. */
  queueJobless(deliveryId: string): Promise<void>;
}
