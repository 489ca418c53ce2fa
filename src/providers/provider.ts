/**
 * What a provider pack is: a small declarative description (names, header, scheme, default
 * timestamp tolerance, where the event type and the delivery id are) and one function, `verify`,
 * written with the shared verifier (verify.ts). Adding a provider is one file, one line in
 * index.ts and its test.
 */

/** The request as the provider sent it, before anything parses it. */
export interface SignedRequest {
  method: string;
  /**
   * The URL the provider called: the webhook's `ingestUrl` as configured (`PUBLIC_URL`), plus the
   * path and query string it was called with. Providers that sign the URL (Twilio, Square,
   * HubSpot) sign this one.
   */
  url: string;
  /** Lower-case names. */
  headers: Record<string, unknown>;
  body: Buffer;
}

/** How fresh a signed timestamp must be: the configured tolerance (or the provider's default) and the clock. */
export interface Freshness {
  toleranceSeconds: number;
  nowMs: number;
}

/** Where a value is: a request header (lower-case name) or a dotted path in the body (JSON, or a form's fields). */
export type Locator = { header: string } | { body: string };

export interface Provider {
  /** The name used in `PUT /v1/webhooks/{id}/provider`. */
  id: string;
  name: string;
  /** What to paste as the secret, in the provider's words. */
  secret: string;
  /** The header (or field) carrying the signature, for the docs. */
  header: string;
  /** The scheme in one line, for the docs. */
  scheme: string;
  /** The provider's default timestamp tolerance; null when its scheme signs no timestamp. */
  toleranceSeconds: number | null;
  /** Where the event type is; the first that yields a value wins. */
  eventType: Locator[];
  /** Where the provider's delivery id (the deduplication key) is; the first that yields a value wins. */
  deliveryId: Locator[];
  /** A header that carries the secret itself: not kept with the event. */
  secretHeader?: string;
  /** True when the request is signed by `secret` (and, where the scheme has one, its timestamp is fresh). */
  verify(req: SignedRequest, secret: string, fresh: Freshness): boolean;
  /**
   * A handshake the provider expects answered at once rather than delivered (Slack's URL
   * verification): the JSON answer for a body that is one, else null. Asked only of a signed request.
   */
  handshake?(body: Buffer): unknown;
}
