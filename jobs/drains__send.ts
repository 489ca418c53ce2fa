import type { Task } from 'graphile-worker';
import type { OutboundClient } from '../src/outbound/http-client.ts';
import { sendDrain } from '../src/drains/send.ts';
import type { Runtime } from '../src/runtime.ts';

/** One drain's pending events, sent in batches (src/drains/send.ts). */
export const drainsSend =
  (rt: Runtime, client: OutboundClient): Task =>
  async (payload) => {
    const { drainId } = payload as { drainId: string };
    await sendDrain(rt, client, drainId);
  };
