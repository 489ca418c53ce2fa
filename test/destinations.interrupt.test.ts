import { expect, it } from 'vitest';
import { createDestinationSenders, type DestinationSend } from '../src/destinations/senders/index.ts';
import { waitFor } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';

// A stopping runner's open HTTP attempts (app.stop): ended at once as interrupted, and so is every later one.
it('interrupt ends the open HTTP sends at once as interrupted, closes their requests, and ends every later send before it is made', async () => {
  const receiver = await startReceiver(() => ({ hang: true }));
  const senders = createDestinationSenders({ allowPrivate: true });
  const destination = { id: 'dst_1', name: 'default', type: 'webhook', config: { url: `${receiver.url}/hook` } };
  const req: DestinationSend = { dispatch: { body: Buffer.from('{}'), contentType: 'application/json', headers: {} }, signing: {}, timeoutMs: 60_000, ids: { deliveryId: 'del_1', eventId: 'evt_1', webhookId: 'wh_1' } };
  try {
    const open = [senders.send(destination, req), senders.send(destination, req)];
    await waitFor(() => receiver.inFlight === 2 || null, 10_000);
    expect(senders.interrupt('attempt interrupted: stopping')).toBe(2);
    for (const r of await Promise.all(open)) expect(r).toMatchObject({ error: 'attempt interrupted: stopping', failure: 'network', interrupted: true });
    // The receiver sees both requests end.
    await waitFor(() => receiver.inFlight === 0 || null, 10_000);
    const later = await senders.send(destination, req);
    expect(later).toMatchObject({ durationMs: 0, error: 'attempt interrupted: stopping', interrupted: true });
    expect(receiver.received).toHaveLength(2);
  } finally {
    await senders.close();
    await receiver.close();
  }
});
