import { standardWebhooks } from './standard-webhooks.ts';

/** Signs the Standard Webhooks way. */
export default standardWebhooks('resend', 'Resend');
