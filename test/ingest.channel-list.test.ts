// The ingest channels are listed once (src/ingest/channels.ts): their names are what an event's
// `channel` and test-delivery's probe may be, the HTTP server mounts their routes from the list,
// and the API half starts the listeners of those that run their own (email's SMTP server).
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { config } from '../src/config.ts';
import { CHANNEL_NAMES, INGEST_CHANNELS, startIngestServers } from '../src/ingest/channels.ts';
import type { Runtime } from '../src/runtime.ts';
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

  it('starts the listeners its channels run (email: an SMTP server greeting on the port asked for) and closes them', async () => {
    expect(INGEST_CHANNELS.filter((c) => c.server).map((c) => c.name)).toEqual(['email']);
    // The SMTP server reads only the configuration until a message arrives.
    const rt = { config: { ...config, HOST: '127.0.0.1' } } as Runtime;
    const servers = await startIngestServers(rt, { email: 0 });
    expect(Object.keys(servers)).toEqual(['email']);
    const greeting = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(servers.email!.port, '127.0.0.1');
      socket.once('data', (d) => {
        socket.destroy();
        resolve(d.toString());
      });
      socket.once('error', reject);
    });
    expect(greeting).toMatch(/^220 /);
    // A port already taken is said to be the SMTP port.
    await expect(startIngestServers(rt, { email: servers.email!.port })).rejects.toThrow(/SMTP_PORT/);
    await servers.email!.close();
  });
});
