/**
 * What a destination pack is: one file per destination type (its name, its label for lists, its
 * tier gate, its config schema and its sender), listed in index.ts. Adding a destination type is
 * one file here and one line in index.ts (docs/architecture.md has the recipe).
 */
import { z } from 'zod';
import type { OutboundClient, OutboundResult } from '../../outbound/http-client.ts';
import type { ListenChannel } from '../senders/cli.ts';
import type { DestinationSend, DestinationSender, DestinationSnapshot, SenderOptions } from '../senders/types.ts';

export type { DestinationSnapshot, StoredConfig } from '../senders/types.ts';

/** What a sender made once per delivery engine gets: the shared HTTP client, and the listen hand-off if this process has one. */
export interface SenderContext extends SenderOptions {
  http: OutboundClient;
  listen?: ListenChannel;
}

/** One sender for every destination of the type, made once per engine (its connections shared). */
export interface SharedSender {
  kind: 'shared';
  create(ctx: SenderContext): {
    send(destination: DestinationSnapshot, req: DestinationSend): Promise<OutboundResult>;
    close?(): Promise<void>;
  };
}

/**
 * A client per destination config and credentials, kept between deliveries. `open` loads the
 * type's SDK on its first send (import() inside), so processes without such destinations never pay
 * for loading it.
 */
export interface ClientPerConfig {
  kind: 'client';
  /** Without credentials of its own, the destination may use the deployment's (ALLOW_AMBIENT_CLOUD_CREDENTIALS). */
  ambientCredentials?: boolean;
  // any: each type's open takes its own config and credentials, checked by its schema when the destination was saved.
  open(config: any, credentials: any, opts: SenderOptions): Promise<DestinationSender>;
}

export interface DestinationPack<Type extends string = string> {
  /** The name used in the API's `type`. */
  type: Type;
  /** For lists (the dashboard's type picker). */
  label: string;
  /** Needs the typed_destinations tier (Pro and above); webhook and cli do not. */
  gated: boolean;
  /** The config's fields; credentials, if the type takes any, under `credentials` (sealed at rest). */
  config: z.AnyZodObject;
  sender: SharedSender | ClientPerConfig;
}

/** Declares a pack, keeping its type's name as a literal (the union DestinationType is built from them). */
export function destinationPack<Type extends string>(pack: DestinationPack<Type>): DestinationPack<Type> {
  return pack;
}

/** Config fields several types share. */
export const httpUrl = z
  .string()
  .max(2048)
  .url()
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL');
export const text = z.string().min(1).max(1024);
export const awsCredentials = z.object({ accessKeyId: text, secretAccessKey: text, sessionToken: z.string().max(4096).optional() }).strict();
