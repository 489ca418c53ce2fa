import { INGEST_TARGETS_TOPIC, onIngestTargetsChanged, readIngestTargetsNotification } from '../db/local-changes.ts';
import { createDestinationSenders, type DestinationSenders } from '../destinations/senders/index.ts';
import { RollupWriter } from '../metrics/rollup.ts';
import type { DirectClaim, Runtime } from '../runtime.ts';
import type { Drain } from './drain.ts';
import { JobTableVacuum } from './job-table-vacuum.ts';
import { AttemptRecorder } from './record.ts';

/**
 * One job runner's delivery engine: its drains (batch-run.ts), the senders of every destination
 * type, the batched result writer and the metrics roll-ups. The path of one attempt: batch-run.ts
 * claims (or claim.ts, one at a time), send-attempt.ts builds (dispatch.ts), signs, sends and
 * classifies the answer (webhook-config/retry-policy.ts), record.ts writes the result.
 */
export interface DeliveryEngine {
  rt: Runtime;
  recorder: AttemptRecorder;
  /** The per-webhook metrics roll-ups of recorded results (flushed once a second; undefined with METRICS_ROLLUPS=off). */
  rollups?: RollupWriter;
  /** The senders of every destination type (webhook, SQS, EventBridge, Pub/Sub, object storage, cli). */
  senders: DestinationSenders;
  /** The drains running on this runner, by webhook (see attemptDelivery). */
  drains: Map<string, Drain>;
  jobTable: JobTableVacuum;
  /** Stops listening for webhook changes (see createDeliveryEngine). */
  unwatch: () => void;
}

export function createDeliveryEngine(rt: Runtime): DeliveryEngine {
  const rollups = rt.config.METRICS_ROLLUPS === 'on' ? new RollupWriter(rt.db.relaxedPool) : undefined;
  const senders = createDestinationSenders({
    allowPrivate: rt.config.ALLOW_PRIVATE_DESTINATIONS,
    allowAmbientCredentials: rt.config.ALLOW_AMBIENT_CLOUD_CREDENTIALS,
    listen: { pool: rt.db.relaxedPool, pubsub: rt.pubsub },
  });
  const drains = new Map<string, Drain>();
  // A webhook paused, archived or given a lower maxInFlight: its drain here checks its lease before
  // it starts another attempt (those it claimed ahead wait again). Changes this process made are
  // heard before they are answered; other processes' when the database's notification comes.
  const local = onIngestTargetsChanged(rt.db, (change) => {
    for (const [id, drain] of drains) {
      if ('webhookId' in change ? id === change.webhookId : drain.projectId === null || drain.projectId === change.projectId) drain.changed();
    }
  });
  // The notification names the webhooks by publicId, with the config_version the change made: it
  // goes to their drains (and to those that have not read their webhook yet).
  const remote = rt.pubsub.subscribe(INGEST_TARGETS_TOPIC, (p) => {
    const { publicIds, version } = readIngestTargetsNotification(p);
    for (const drain of drains.values()) {
      if (!publicIds || drain.publicId === null || publicIds.includes(drain.publicId)) drain.changed(version);
    }
    return undefined;
  });
  const unwatch = () => {
    local();
    void remote.return?.();
  };
  return { rt, rollups, recorder: new AttemptRecorder(rt.db.relaxedPool, 200, rollups), drains, senders, jobTable: new JobTableVacuum(rt.db.pool), unwatch };
}

/**
 * Whether a drain of the webhook runs on this runner and takes hand-overs (RunnerWakeUp.drainRunning):
 * ingest in this process then writes a due delivery without a job and hands it over once committed.
 */
export function drainRunning(engine: DeliveryEngine, webhookId: string): boolean {
  return takingHandOvers(engine, webhookId) !== null;
}

function takingHandOvers(engine: DeliveryEngine, webhookId: string): Drain | null {
  const drain = engine.drains.get(webhookId);
  return drain?.accepting ? drain : null;
}

/**
 * Hands a due delivery just ingested in this process to its webhook's drain here, if one runs
 * (RunnerWakeUp.handOver): it is claimed with the drain's next batch (its job, if it was written
 * with one, deleted before any runner fetches it). No job, no NOTIFY, no job fetch, no job
 * completion. False when no drain of the webhook runs here (or it is stopping): the caller wakes
 * the runners instead, or gives a delivery written without a job its job. A drain that ends
 * before claiming it hands its named deliveries on (batch-run.ts); should this process die first,
 * the sweeper gives the delivery a job (sweep.ts).
 */
export function handOverToDrain(engine: DeliveryEngine, webhookId: string, deliveryId: string): boolean {
  const drain = takingHandOvers(engine, webhookId);
  drain?.offer(deliveryId);
  return drain !== null;
}

/**
 * Reserves the first attempt of a delivery ingest is about to write, in the webhook's drain here
 * (RunnerWakeUp.claimDirect; see Drain.direct): null when none runs here, or it has no room now.
 */
export function claimForDrain(engine: DeliveryEngine, webhookId: string, configVersion: number): DirectClaim | null {
  return takingHandOvers(engine, webhookId)?.direct?.(configVersion) ?? null;
}

/**
 * First step of a runner's shutdown: every drain stops claiming, sends nothing more that is still
 * waiting for a slot (those deliveries go back to wait, with their jobs), and gives its lease
 * back once the requests it has open are answered.
 */
export function stopDrains(engine: DeliveryEngine): void {
  engine.unwatch();
  for (const drain of engine.drains.values()) drain.stop();
}
