import type { Task } from 'graphile-worker';
import { attemptDelivery, type DeliveryEngine } from '../src/deliveries/attempt.ts';

export const deliveriesAttempt =
  (engine: DeliveryEngine): Task =>
  async (payload) => {
    const { deliveryId } = payload as { deliveryId?: unknown };
    if (typeof deliveryId !== 'string') return; // malformed job: nothing to attempt
    await attemptDelivery(engine, deliveryId);
  };
