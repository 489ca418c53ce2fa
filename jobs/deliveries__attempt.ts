import type { Task } from 'graphile-worker';
import { attemptDelivery } from '../src/deliveries/batch-run.ts';
import type { DeliveryEngine } from '../src/deliveries/engine.ts';

export const deliveriesAttempt =
  (engine: DeliveryEngine): Task =>
  async (payload, helpers) => {
    const { deliveryId, webhookId } = payload as { deliveryId?: unknown; webhookId?: unknown };
    if (typeof deliveryId !== 'string') return; // malformed job: nothing to attempt
    await attemptDelivery(engine, deliveryId, typeof webhookId === 'string' ? webhookId : undefined, helpers.abortSignal);
  };
