import type { Task } from 'graphile-worker';
import { runAlertEvaluation } from '../src/alerts/evaluate.ts';
import type { Runtime } from '../src/runtime.ts';

/** Evaluates the alert rules (src/alerts/evaluate.ts) and plans the next evaluation. */
export const alertsEvaluate =
  (rt: Runtime): Task =>
  async () => {
    await runAlertEvaluation(rt);
  };
