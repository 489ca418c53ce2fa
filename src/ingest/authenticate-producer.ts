import type { IncomingHttpHeaders } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { Unauthorized } from '../errors.ts';
import { constantTimeEqual } from '../encryption.ts';
import { openSecret } from '../webhook-config/secrets.ts';

export function producerUnauthorized(): Unauthorized {
  return new Unauthorized(
    'Show the ingest secret (Authorization: Bearer whsec_… or x-webhook-secret: whsec_…) or sign the request the Standard Webhooks way, or, where the webhook has a provider pack, as that provider signs (valid and fresh).',
  );
}

/** The secret the producer shows in a header, if any. */
export function presentedSecret(headers: IncomingHttpHeaders): string | undefined {
  const direct = headers['x-webhook-secret'];
  if (typeof direct === 'string' && direct !== '') return direct.trim();
  const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '');
  return m?.[1];
}

export function hasStandardSignature(headers: IncomingHttpHeaders): boolean {
  return !!(headers['webhook-id'] && headers['webhook-timestamp'] && headers['webhook-signature']);
}

/** Checks a shown secret against each valid version, in constant time per comparison. */
export function secretMatches(presented: string, sealedSecrets: string[]): boolean {
  let ok = false;
  for (const sealed of sealedSecrets) if (constantTimeEqual(presented, openSecret(sealed))) ok = true;
  return ok;
}

// Verifiers are a pure function of the secret text.
const verifiers = new Map<string, Webhook>();
function verifierFor(secret: string): Webhook {
  let v = verifiers.get(secret);
  if (!v) {
    v = new Webhook(secret);
    if (verifiers.size >= 10_000) verifiers.clear();
    verifiers.set(secret, v);
  }
  return v;
}

/** A Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) by any valid version. */
export function signatureMatches(body: Buffer, headers: IncomingHttpHeaders, sealedSecrets: string[]): boolean {
  const h = {
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  };
  for (const sealed of sealedSecrets) {
    try {
      verifierFor(openSecret(sealed)).verify(body, h, { jsonParse: false });
      return true;
    } catch {
      // try the next version
    }
  }
  return false;
}
