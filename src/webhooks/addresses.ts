import type { Config } from '../config.ts';

/** The public addresses a webhook's producers use, all derived from its publicId. */
export function webhookAddresses(config: Pick<Config, 'publicUrl' | 'EMAIL_DOMAIN'>, publicId: string) {
  return {
    ingestUrl: `${config.publicUrl}/i/${publicId}`,
    formIngestUrl: `${config.publicUrl}/f/${publicId}`,
    emailIngestAddress: `${publicId}@${config.EMAIL_DOMAIN}`,
  };
}
