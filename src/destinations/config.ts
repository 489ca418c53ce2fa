import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import { decryptSecret, encryptSecret } from '../encryption.ts';
import { parseInput } from '../validation.ts';
import { DESTINATION_TYPES, findDestinationPack, type DestinationType, type StoredConfig } from './packs/index.ts';

export { DESTINATION_TYPES, type DestinationType, type DestinationSnapshot, type StoredConfig } from './packs/index.ts';

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
  let schema: z.AnyZodObject = findDestinationPack(type)!.config;
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
