import { describe, expect, it } from 'vitest';
import { isPrivateAddress } from '../src/outbound/address-guard.ts';
import { createOutboundClient } from '../src/outbound/http-client.ts';
import { startReceiver } from './support/receiver.ts';

describe('outbound safety', () => {
  it('classifies private, loopback and link-local addresses', () => {
    for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '0.0.0.0', '100.64.0.1', '224.0.0.1', '::', '::1', 'fe80::1', 'fd00::1', 'ff02::1']) {
      expect(isPrivateAddress(ip), ip).toBe(true);
    }
    // IPv4 inside IPv6, as URL parsing writes it ([::ffff:127.0.0.1] becomes ::ffff:7f00:1): mapped, NAT64, compatible.
    for (const ip of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:a9fe:a9fe', '64:ff9b::7f00:1', '::7f00:1', '[::1]']) expect(isPrivateAddress(ip), ip).toBe(true);
    for (const ip of ['8.8.8.8', '1.1.1.1', '172.15.0.1', '2606:4700::1111', '::ffff:808:808', '64:ff9b::808:808']) expect(isPrivateAddress(ip), ip).toBe(false);
    // 6to4 (2002::/16 carries an IPv4 in bits 16-48) and Teredo (2001::/32, the client inverted in the last 32 bits).
    for (const ip of ['2002:7f00:1::', '2002:7f00:0001:0:0:0:0:1', '2002:a00:1::1', '2002:c0a8:101::', '2002:a9fe:a9fe::', '2001:0:4136:e378:8000:63bf:80ff:fffe', '2001::ffff:fffe'])
      expect(isPrivateAddress(ip), ip).toBe(true);
    for (const ip of ['2002:808:808::', '2002:101:101::1', '2001:0:4136:e378:8000:63bf:f7f7:f7f7', '2001:db9::1', '2606:4700:4700::1111']) expect(isPrivateAddress(ip), ip).toBe(false);
  });

  it('refuses loopback targets, by literal and after DNS resolution, unless private destinations are allowed', async () => {
    const receiver = await startReceiver();
    const port = new URL(receiver.url).port;
    const strict = createOutboundClient({ allowPrivate: false });
    const open = createOutboundClient({ allowPrivate: true });
    try {
      for (const url of [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`, `http://[::1]:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`]) {
        const res = await strict.send({ url, method: 'POST', headers: {}, body: Buffer.from('{}'), timeoutMs: 2000 });
        expect(res.failure, url).toBe('blocked');
        expect(res.statusCode).toBeUndefined();
      }
      expect(receiver.received).toHaveLength(0);
      const ok = await open.send({ url: `http://127.0.0.1:${port}/`, method: 'POST', headers: {}, body: Buffer.from('{}'), timeoutMs: 2000 });
      expect(ok.statusCode).toBe(200);
    } finally {
      strict.close();
      open.close();
      await receiver.close();
    }
  });
});
