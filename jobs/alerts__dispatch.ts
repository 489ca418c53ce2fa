import type { Task } from 'graphile-worker';
import { sendAlertDispatch, type AlertMessage } from '../src/alerts/evaluate.ts';
import type { Runtime } from '../src/runtime.ts';

/** Sends one alert dispatch to its channels (src/alerts/evaluate.ts); a failed channel fails the job, which is retried. */
export const alertsDispatch =
  (rt: Runtime): Task =>
  async (payload) => {
    const { dispatchId, message } = payload as { dispatchId: string; message: AlertMessage };
    await sendAlertDispatch(rt, dispatchId, message);
  };
