import type { Config } from '../config.ts';
import { FORM_INGEST_PATH, HTTP_INGEST_PATH } from '../wire/ingest-paths.ts';

/** The public addresses a webhook's producers use, all derived from its publicId. */
export function webhookAddresses(config: Pick<Config, 'publicUrl' | 'EMAIL_DOMAIN'>, publicId: string) {
  return {
    ingestUrl: `${config.publicUrl}${HTTP_INGEST_PATH}/${publicId}`,
    formIngestUrl: `${config.publicUrl}${FORM_INGEST_PATH}/${publicId}`,
    emailIngestAddress: `${publicId}@${config.EMAIL_DOMAIN}`,
  };
}
