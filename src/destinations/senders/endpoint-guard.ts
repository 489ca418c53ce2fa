import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { guardedLookup, isPrivateAddress } from '../../deliveries/outbound-http.ts';

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

/** For clients that resolve names themselves (gRPC): resolves the host now and refuses private addresses. */
export async function refusedResolvedHost(url: string, allowPrivate: boolean): Promise<string | null> {
  if (allowPrivate) return null;
  const literal = refusedLiteralHost(url, allowPrivate);
  if (literal) return literal;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return null;
  const addresses = await dns.promises.lookup(host, { all: true });
  const bad = addresses.find((a) => isPrivateAddress(a.address));
  return bad ? `endpoint resolves to a private address (${bad.address})` : null;
}

/** Keep-alive agents whose DNS lookups refuse private addresses (as the HTTP sender's do). */
export function guardedAgents(allowPrivate: boolean, maxSockets = 50) {
  const options = { keepAlive: true, maxSockets, lookup: guardedLookup(allowPrivate) };
  return { httpAgent: new http.Agent(options), httpsAgent: new https.Agent(options) };
}
