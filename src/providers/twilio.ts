import type { Provider } from './provider.ts';
import { bytesEqual, header, hmac, matchesAny, sha256 } from './verify.ts';

/**
 * https://www.twilio.com/docs/usage/webhooks/webhooks-security: the URL, then each form parameter
 * (sorted by name) as name + value; a JSON body instead sends `bodySHA256` in the URL's query and
 * the URL alone is signed. The URL is the ingest URL as configured (PUBLIC_URL); like Twilio's own
 * library, it is also tried with the default port written out or left out.
 */
export default {
  id: 'twilio',
  name: 'Twilio',
  secret: "the account's auth token",
  header: 'X-Twilio-Signature',
  scheme: 'HMAC-SHA1 (base64) of the URL + sorted form parameters; JSON bodies: of the URL with `bodySHA256`',
  toleranceSeconds: null,
  eventType: [],
  deliveryId: [{ header: 'i-twilio-idempotency-token' }],
  verify(req, secret) {
    const presented = header(req, 'x-twilio-signature');
    const url = new URL(req.url);
    const bodyHash = url.searchParams.get('bodySHA256');
    let params = '';
    if (bodyHash !== null) {
      if (!bytesEqual(Buffer.from(bodyHash.toLowerCase()), Buffer.from(sha256(req.body).toString('hex')))) return false;
    } else {
      const byName = new Map<string, Set<string>>();
      for (const [k, v] of new URLSearchParams(req.body.toString('utf8'))) byName.set(k, (byName.get(k) ?? new Set()).add(v));
      for (const k of [...byName.keys()].sort()) for (const v of [...byName.get(k)!].sort()) params += k + v;
    }
    // new URL() drops a default port; the URL as configured may have written it out.
    const port = url.protocol === 'https:' ? ':443' : ':80';
    const withPort = url.port !== '' ? req.url : req.url.includes(`${url.hostname}${port}`) ? req.url.replace(`${url.hostname}${port}`, url.hostname) : req.url.replace(url.hostname, `${url.hostname}${port}`);
    return [req.url, withPort].some((u) => matchesAny(hmac('sha1', secret, u + params), [presented], 'base64'));
  },
} satisfies Provider;
