// What the webhook page's sections share: the webhook's fields (one fragment, read by the page and
// returned by every mutation that changes the webhook) and a destination's.
import { graphql, type ResultOf } from '../../graphql.ts';
import { SETTINGS_FIELDS } from '../../parts/webhook-controls.tsx';

export const WEBHOOK = graphql(
  `fragment WebhookFields on Webhook @_unmask { id status publicId ingestUrl formIngestUrl emailIngestAddress formAccess formAllowedOrigins createdAt updatedAt ...WebhookSettingsFields }`,
  [SETTINGS_FIELDS],
);

export type Webhook = ResultOf<typeof WEBHOOK>;

export const DESTINATION = graphql(`fragment DestinationFields on Destination @_unmask { id name type config isDefault hasCredentials listenerConnected }`);

/** A destination; `listenerConnected` (cli destinations): whether a `relay listen` session takes its deliveries now. */
export type Destination = ResultOf<typeof DESTINATION>;
