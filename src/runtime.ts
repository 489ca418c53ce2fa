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
  /**
   * Reserves, in a drain of the webhook running in this process, the first attempt of a delivery
   * about to be written, when the drain has room for it now and the webhook's settings as it last
   * read them at `configVersion` (the version the ingest statement then checks): ingest writes the
   * delivery claimed (status `delivering`, no job), then starts the attempt or cancels. Null: no
   * such drain, or not now (the caller hands over or queues as usual).
   */
  claimDirect(webhookId: string, configVersion: number): DirectClaim | null;
}

/** A delivery's first attempt reserved in a drain of this process (RunnerWakeUp.claimDirect). */
export interface DirectClaim {
  /** The drain's slot lease, written on the delivery. */
  leaseId: string;
  /** How long the claim holds the delivery (its lease_until from the statement's now()). */
  leaseMs: number;
  /** The delivery was written, claimed, and committed: its attempt starts. */
  start(stored: DirectClaimStored): void;
  /** Nothing was written (refused, a duplicate, an error): the reservation is given back. */
  cancel(): void;
}

/** What a directly claimed delivery's attempt needs of what ingest wrote (as a claim would read it). */
export interface DirectClaimStored {
  row: { id: string; project_id: string; webhook_id: string; event_id: string; destination: unknown; idempotency_key: string | null };
  body: Buffer;
  contentType: string | null;
  eventHeaders: Record<string, string>;
  event: { channel: string; method: string | null; path: string | null; query: Record<string, unknown>; receivedAt: Date };
  /** Someone listens to the project's deliveryUpdated: the drain sends the `delivering` change first. */
  listened: boolean;
}
