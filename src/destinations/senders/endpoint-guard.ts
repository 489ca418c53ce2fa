import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { guardedLookup, isPrivateAddress } from './http.ts';

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
