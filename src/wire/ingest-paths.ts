/**
 * Where the HTTP ingest channels take requests, written once: the channels mount their routes
 * here (ingest/http-ingest.ts, ingest/form-ingest.ts), a webhook's addresses are built from them
 * (webhooks/addresses.ts) and the OpenAPI document's paths name them (http/openapi.ts). In the
 * base, so the channels, the webhooks domain above them and the edge all read the same strings.
 */

/** HTTP ingest: `/i/{publicId}[/path]`. */
export const HTTP_INGEST_PATH = '/i';

/** Form ingest: `/f/{publicId}`. */
export const FORM_INGEST_PATH = '/f';
