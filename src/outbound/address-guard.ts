import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

const PRIVATE = new net.BlockList();
for (const [address, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 3],
] as const) PRIVATE.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of [['::', 127], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8]] as const) PRIVATE.addSubnet(address, prefix, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 counts as two), or null. */
function ipv6Groups(v6: string): number[] | null {
  let text = v6.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * IPv4 addresses carried in an IPv6 one, which reach (or are routed to) that IPv4 host: NAT64
 * (64:ff9b::/96), IPv4-compatible (::/96), IPv4-mapped (::ffff:0:0/96), 6to4 (2002::/16, bits
 * 16-48) and Teredo (2001::/32, the client's address inverted in the last 32 bits).
 */
function embeddedIPv4s(v6: string): string[] {
  const g = ipv6Groups(v6);
  if (!g) return [];
  const out: string[] = [];
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) out.push(v4Of(g[6], g[7]));
  if (zeroTo(6)) out.push(v4Of(g[6], g[7]));
  if (zeroTo(5) && g[5] === 0xffff) out.push(v4Of(g[6], g[7]));
  if (g[0] === 0x2002) out.push(v4Of(g[1], g[2]));
  if (g[0] === 0x2001 && g[1] === 0) out.push(v4Of(g[6] ^ 0xffff, g[7] ^ 0xffff));
  return out;
}

/**
 * Addresses a webhook service must not be steered into (SSRF): private, loopback, link-local,
 * multicast, etc., also written as IPv4-mapped (::ffff:7f00:1, which the BlockList checks against
 * the IPv4 ranges), NAT64, IPv4-compatible, 6to4 (2002:7f00:1::) or Teredo IPv6 addresses.
 */
export function isPrivateAddress(ip: string): boolean {
  const address = ip.replace(/^\[|\]$/g, '').toLowerCase();
  if (net.isIPv4(address)) return PRIVATE.check(address, 'ipv4');
  if (!net.isIPv6(address)) return false;
  if (embeddedIPv4s(address).some((v4) => net.isIPv4(v4) && PRIVATE.check(v4, 'ipv4'))) return true;
  return PRIVATE.check(address, 'ipv6');
}

export class BlockedAddress extends Error {}

export function guardedLookup(allowPrivate: boolean): net.LookupFunction {
  return (hostname, options, callback) => {
    // net.LookupFunction's callback is an overload set (one address, or all of them with
    // `options.all`); node calls it both ways, so it is called here as the plain function it is.
    const answer = callback as unknown as (err: Error | null, address?: string | dns.LookupAddress[], family?: number) => void;
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return answer(err);
      const list = addresses as dns.LookupAddress[];
      const bad = !allowPrivate && list.find((a) => isPrivateAddress(a.address));
      if (bad) return answer(new BlockedAddress(`destination resolves to a private address (${bad.address})`));
      if ((options as { all?: boolean }).all) return answer(null, list);
      answer(null, list[0].address, list[0].family);
    });
  };
}

/**
 * The same outbound rule as HTTP destinations: a destination must not steer the service into
 * private, loopback or link-local addresses (unless ALLOW_PRIVATE_DESTINATIONS). Hostnames are
 * checked when a connection resolves them (guardedAgents); literal IPs skip DNS, so they are
 * checked here.
 */
export function refusedLiteralHost(url: string | undefined, allowPrivate: boolean): string | null {
  if (!url || allowPrivate) return null;
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return `invalid endpoint URL ${url}`;
  }
  return net.isIP(host) && isPrivateAddress(host) ? `endpoint is a private address (${host})` : null;
}

/**
 * For clients that resolve names themselves (gRPC): the endpoint host's addresses, resolved once
 * and all checked, or why they are refused. The caller connects to one of these addresses (not to
 * the name, which a second lookup could answer differently: DNS rebinding).
 */
export async function checkedAddresses(url: string, allowPrivate: boolean): Promise<{ addresses: string[] } | { refused: string }> {
  const literal = refusedLiteralHost(url, allowPrivate);
  if (literal) return { refused: literal };
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return { addresses: [host] };
  const answers = await dns.promises.lookup(host, { all: true });
  const bad = allowPrivate ? undefined : answers.find((a) => isPrivateAddress(a.address));
  if (bad) return { refused: `endpoint resolves to a private address (${bad.address})` };
  return { addresses: answers.map((a) => a.address) };
}

/** Keep-alive agents whose DNS lookups refuse private addresses (as the HTTP sender's do). */
export function guardedAgents(allowPrivate: boolean, maxSockets = 50) {
  const options = { keepAlive: true, maxSockets, lookup: guardedLookup(allowPrivate) };
  return { httpAgent: new http.Agent(options), httpsAgent: new https.Agent(options) };
}
