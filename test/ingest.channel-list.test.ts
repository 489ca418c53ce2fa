// The ingest channels are listed once (src/ingest/channels.ts): their names are what an event's
// `channel` and test-delivery's probe may be, and the HTTP server mounts their routes from the list.
import { describe, expect, it } from 'vitest';
import { CHANNEL_NAMES, INGEST_CHANNELS } from '../src/ingest/channels.ts';
import { probeContext } from '../src/webhooks/test-delivery.ts';

describe('the ingest channel list', () => {
  it('names the four channels once', () => {
    expect(CHANNEL_NAMES).toEqual(['http', 'form', 'email', 'cron']);
  });

  it('gives the routes the server mounts: HTTP at /i, forms at /f', () => {
    expect(INGEST_CHANNELS.flatMap((c) => (c.route ? [[c.name, c.route.prefix]] : []))).toEqual([
      ['http', '/i'],
      ['form', '/f'],
    ]);
  });

  it("is what test-delivery's probe accepts as a channel", () => {
    for (const channel of CHANNEL_NAMES) expect(probeContext({ channel, body: {} }).channel).toBe(channel);
    expect(() => probeContext({ channel: 'fax', body: {} })).toThrow(/channel/);
  });
});
