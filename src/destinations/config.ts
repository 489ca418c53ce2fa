import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import { decryptSecret, encryptSecret } from '../encryption.ts';
import { parseInput } from '../validation.ts';
import { headerMapSchema } from '../webhook-config/custom-headers.ts';

export const DESTINATION_TYPES = ['webhook', 'aws_sqs', 'aws_eventbridge', 'gcp_pubsub', 'object_storage', 'cli'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];

const httpUrl = z
  .string()
  .max(2048)
  .url()
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL');
const text = z.string().min(1).max(1024);
const awsCredentials = z.object({ accessKeyId: text, secretAccessKey: text, sessionToken: z.string().max(4096).optional() }).strict();
// A Google service-account key file, as downloaded (JSON object).
const gcpCredentials = z.object({ client_email: text, private_key: z.string().min(1).max(16_384) }).passthrough();

const CONFIG_SCHEMAS = {
  webhook: z.object({ url: httpUrl, method: z.enum(['POST', 'PUT', 'PATCH']).default('POST'), headers: headerMapSchema.optional() }).strict(),
  aws_sqs: z.object({ queueUrl: httpUrl, region: text, endpoint: httpUrl.optional(), credentials: awsCredentials.optional() }).strict(),
  aws_eventbridge: z
    .object({ eventBusName: text, region: text, source: text, detailType: text, endpoint: httpUrl.optional(), credentials: awsCredentials.optional() })
    .strict(),
  gcp_pubsub: z.object({ projectId: text, topic: text, endpoint: httpUrl.optional(), credentials: gcpCredentials }).strict(),
  object_storage: z
    .object({
      bucket: z.string().min(3).max(63),
      region: text.optional(),
      endpoint: httpUrl.optional(),
      prefix: z.string().max(1024).optional(),
      forcePathStyle: z.boolean().optional(),
      credentials: awsCredentials,
    })
    .strict(),
  // Delivered through `relay listen` (CONTRACT §13): no address, so the server never connects anywhere for it.
  cli: z
    .object({ url: z.undefined({ invalid_type_error: 'a cli destination takes no url: `relay listen WEBHOOK_ID --forward-to URL` sends its deliveries from your machine' }).optional() })
    .strict(),
} satisfies Record<DestinationType, z.ZodTypeAny>;

/** What is stored in `destinations.config`: the type's fields, credentials sealed as `credentialsEnc`. */
export type StoredConfig = Record<string, unknown> & { credentialsEnc?: string };

/** The destination as the delivery engine gets it on the delivery row (credentials still sealed). */
export interface DestinationSnapshot {
  id: string;
  name: string;
  type: DestinationType;
  config: StoredConfig;
}

export function assertDestinationType(type: unknown, param = 'type'): DestinationType {
  if (typeof type !== 'string' || !(DESTINATION_TYPES as readonly string[]).includes(type)) {
    throw new InvalidRequest(`${param} must be one of ${DESTINATION_TYPES.join(', ')}.`, param);
  }
  return type as DestinationType;
}

/**
 * Validates a type's config (400 with `param`) and seals its credentials. `previous` is
 * the stored config of the same type: when the new config leaves credentials out, the
 * stored ones are kept (callers never see them, so they cannot send them back).
 */
export function sealConfig(type: DestinationType, raw: unknown, param: string, previous?: StoredConfig): StoredConfig {
  let schema: z.AnyZodObject = CONFIG_SCHEMAS[type];
  if (previous?.credentialsEnc) schema = schema.extend({ credentials: (schema.shape.credentials as z.ZodTypeAny).optional() });
  const parsed = parseInput(schema, raw ?? {}, param) as Record<string, unknown>;
  const { credentials, ...rest } = parsed;
  const stored: StoredConfig = { ...rest };
  if (credentials !== undefined) stored.credentialsEnc = encryptSecret(JSON.stringify(credentials));
  else if (previous?.credentialsEnc) stored.credentialsEnc = previous.credentialsEnc;
  return stored;
}

/** The config as the API shows it: never the credentials. */
export function publicConfig(config: unknown): Record<string, unknown> {
  const { credentialsEnc: _sealed, ...rest } = (config ?? {}) as StoredConfig;
  return rest;
}

export function hasCredentials(config: unknown): boolean {
  return typeof (config as StoredConfig | null)?.credentialsEnc === 'string';
}

/** For the delivery engine: the plaintext credentials of a destination snapshot, if it has any. */
export function destinationCredentials<T = Record<string, unknown>>(snapshot: { config: unknown }): T | null {
  const sealed = (snapshot.config as StoredConfig | null)?.credentialsEnc;
  return sealed ? (JSON.parse(decryptSecret(sealed)) as T) : null;
}
