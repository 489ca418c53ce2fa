import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths, webhooks } from './schema.ts';

export type { components, operations, paths, webhooks };
export type ServiceClient = Client<paths>;

/** The contract's error body, as every non-2xx answer carries it. */
export type ServiceError = components['schemas']['Error'];

/**
 * A typed client of the service's REST API (`/v1`) and HTTP ingest (`/i/{publicId}`).
 * `baseUrl` is the service's root (the paths include `/v1`); `apiKey` is sent as
 * `Authorization: Bearer …` on every request (ingest requests set their own header).
 */
export function createServiceClient(options: ClientOptions & { baseUrl: string; apiKey?: string }): ServiceClient {
  const { apiKey, headers, ...rest } = options;
  return createClient<paths>({ ...rest, headers: { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...(headers as Record<string, string> | undefined) } });
}
