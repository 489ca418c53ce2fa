// The outbound signature (src/deliveries/signing.ts) is the Standard Webhooks one: the reference
// package verifies it, for text and for bytes, with every secret of a rotation.
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signingHeaders } from '../src/deliveries/signing.ts';

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('outbound signatures', () => {
  it('equal what the standardwebhooks package signs for a text body, and verify with it', () => {
    const s = secret();
    const at = new Date('2026-11-26T12:00:00Z');
    const body = Buffer.from(JSON.stringify({ hello: 'wörld', n: 1 }));
    const headers = signingHeaders([s], 'msg_1', body, at);
    expect(headers['webhook-signature']).toBe(new Webhook(s).sign('msg_1', at, body.toString('utf8')));
    expect(headers['webhook-timestamp']).toBe(String(at.getTime() / 1000));
    const now = signingHeaders([s], 'msg_1', body);
    expect(() => new Webhook(s).verify(body.toString('utf8'), now)).not.toThrow();
    expect(() => new Webhook(secret()).verify(body.toString('utf8'), now)).toThrow();
  });

  it('sign the raw bytes of a body that is not UTF-8, and carry one signature per secret during a rotation', () => {
    const [a, b] = [secret(), secret()];
    const body = Buffer.from([0xff, 0xfe, 0x00, 0x41]);
    const headers = signingHeaders([a, b], 'msg_2', body);
    const signatures = headers['webhook-signature'].split(' ');
    expect(signatures).toHaveLength(2);
    expect(signatures.every((sig) => /^v1,[A-Za-z0-9+/]{43}=$/.test(sig))).toBe(true);
    // Text bodies: each secret alone verifies with the package.
    const text = '{"rotated":true}';
    const rotated = signingHeaders([a, b], 'msg_3', Buffer.from(text));
    expect(() => new Webhook(a).verify(text, rotated)).not.toThrow();
    expect(() => new Webhook(b).verify(text, rotated)).not.toThrow();
    // Bytes (the package signs strings only): the same signature again for the same id and time, another for another key.
    expect(signingHeaders([a], 'msg_2', body, new Date(Number(headers['webhook-timestamp']) * 1000))['webhook-signature']).toBe(signatures[0]);
    expect(signatures[0]).not.toBe(signatures[1]);
  });
});
