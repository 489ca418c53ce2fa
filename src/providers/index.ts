/**
 * The provider packs: one file per provider, listed here. A webhook's pack is
 * `{provider, secretEnc, toleranceSeconds}` (webhooks.provider_pack); ingest asks this module
 * whether a request is signed by it, and what its event type and delivery id are.
 */
import { openSecret } from '../encryption.ts';
import calendly from './calendly.ts';
import clerk from './clerk.ts';
import discord from './discord.ts';
import github from './github.ts';
import gitlab from './gitlab.ts';
import hubspot from './hubspot.ts';
import intercom from './intercom.ts';
import jira from './jira.ts';
import linear from './linear.ts';
import mailgun from './mailgun.ts';
import paddle from './paddle.ts';
import type { Locator, Provider, SignedRequest } from './provider.ts';
import resend from './resend.ts';
import sendgrid from './sendgrid.ts';
import shopify from './shopify.ts';
import slack from './slack.ts';
import square from './square.ts';
import stripe from './stripe.ts';
import svix from './svix.ts';
import twilio from './twilio.ts';
import typeform from './typeform.ts';
import vercel from './vercel.ts';
import zendesk from './zendesk.ts';

export type { Provider, SignedRequest } from './provider.ts';

export const PROVIDERS: readonly Provider[] = [
  stripe, github, gitlab, shopify, slack, twilio, paddle, linear, square, zendesk, intercom,
  hubspot, typeform, mailgun, sendgrid, discord, vercel, calendly, jira, svix, clerk, resend,
];

const BY_ID = new Map(PROVIDERS.map((p) => [p.id, p]));

export function findProvider(id: string): Provider | undefined {
  return BY_ID.get(id);
}

/** What webhooks.provider_pack holds. */
export interface ProviderPack {
  provider: string;
  /** The provider's secret, sealed like the other secrets (encryption.ts). */
  secretEnc: string;
  /** null: the provider's default. */
  toleranceSeconds: number | null;
  /**
   * Previous secrets still in a rotation's grace period (sealed), as ingest's lookup reads them
   * from webhook_secrets (kind `provider`); not stored in the pack itself.
   */
  graceSecretsEnc?: string[];
}

/** True when the request carries a valid signature of the webhook's provider, by its secret or one in a rotation's grace period (a scheme that throws counts as no). */
export function providerSigned(pack: ProviderPack, req: SignedRequest, nowMs = Date.now()): boolean {
  const provider = BY_ID.get(pack.provider);
  if (!provider) return false;
  const fresh = { toleranceSeconds: pack.toleranceSeconds ?? provider.toleranceSeconds ?? 0, nowMs };
  for (const sealed of [pack.secretEnc, ...(pack.graceSecretsEnc ?? [])]) {
    try {
      if (provider.verify(req, openSecret(sealed), fresh)) return true;
    } catch {
      // a scheme that throws counts as no; try the next version
    }
  }
  return false;
}

/**
 * The answer to a provider's handshake (Slack's URL verification: `{challenge}`), when the request
 * is one and carries a valid signature of the webhook's provider; else null (ingest goes on as usual).
 */
export function providerHandshake(pack: ProviderPack, req: SignedRequest): unknown {
  const handshake = BY_ID.get(pack.provider)?.handshake;
  if (!handshake) return null;
  const answer = handshake(req.body);
  return answer !== null && providerSigned(pack, req) ? answer : null;
}

/** Whether a body may be a provider's handshake, by a look at its bytes (no parse): only then is it asked for. */
export function mayBeHandshake(body: Buffer): boolean {
  return body.length < 64 * 1024 && body.includes('url_verification');
}

/** The body's fields, for locators: JSON where it parses, else form fields, else nothing. */
export function bodyFields(body: Buffer, contentType: string | null): unknown {
  const text = body.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return contentType?.startsWith('application/x-www-form-urlencoded') ? Object.fromEntries(new URLSearchParams(text)) : null;
  }
}

function locate(locators: Locator[], headers: Record<string, unknown>, fields: () => unknown): string | null {
  for (const l of locators) {
    let v: unknown;
    if ('header' in l) {
      v = headers[l.header];
      if (Array.isArray(v)) v = v[0];
    } else {
      v = fields();
      for (const key of l.body.split('.')) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined;
    }
    if ((typeof v === 'string' && v !== '') || typeof v === 'number') return String(v);
  }
  return null;
}

/** The event type, as the provider names it (Stripe `type`, GitHub `x-github-event`, …), or null. */
export function providerEventType(pack: ProviderPack, headers: Record<string, unknown>, fields: () => unknown): string | null {
  const provider = BY_ID.get(pack.provider);
  return provider ? locate(provider.eventType, headers, fields) : null;
}

/** The provider's delivery id (its own retries repeat it), or null. */
export function providerDeliveryId(pack: ProviderPack, headers: Record<string, unknown>, fields: () => unknown): string | null {
  const provider = BY_ID.get(pack.provider);
  return provider ? locate(provider.deliveryId, headers, fields) : null;
}

/** The header carrying the provider's secret itself (GitLab's token), not kept with the event. */
export function providerSecretHeader(pack: ProviderPack): string | undefined {
  return BY_ID.get(pack.provider)?.secretHeader;
}
