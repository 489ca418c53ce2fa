/**
 * The destination packs: one file per destination type, listed here. The API's type names, the
 * config validation, the tier gate, the GraphQL enum DestinationType (and through it the OpenAPI
 * document and the dashboard's type list) and the senders are all read from this list.
 */
import awsEventbridge from './aws-eventbridge.ts';
import awsSqs from './aws-sqs.ts';
import cli from './cli.ts';
import gcpPubsub from './gcp-pubsub.ts';
import objectStorage from './object-storage.ts';
import type { DestinationPack } from './pack.ts';
import webhook from './webhook.ts';

export type { DestinationPack, DestinationSnapshot, StoredConfig } from './pack.ts';

export const DESTINATION_PACKS = [webhook, awsSqs, awsEventbridge, gcpPubsub, objectStorage, cli] as const;

export type DestinationType = (typeof DESTINATION_PACKS)[number]['type'];

export const DESTINATION_TYPES: readonly DestinationType[] = DESTINATION_PACKS.map((p) => p.type);

const BY_TYPE = new Map<string, DestinationPack>(DESTINATION_PACKS.map((p) => [p.type, p]));

export function findDestinationPack(type: string): DestinationPack | undefined {
  return BY_TYPE.get(type);
}

/** "webhook, aws_sqs, … or cli", for descriptions. */
export function destinationTypeList(): string {
  return `${DESTINATION_TYPES.slice(0, -1).join(', ')} or ${DESTINATION_TYPES.at(-1)}`;
}
