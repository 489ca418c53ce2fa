import { z } from 'zod';
import { awsCredentials, destinationPack, httpUrl, text } from './pack.ts';

/** An object per delivery in an S3-compatible bucket. */
export default destinationPack({
  type: 'object_storage',
  label: 'Object storage (Pro)',
  gated: true,
  config: z
    .object({
      bucket: z.string().min(3).max(63),
      region: text.optional(),
      endpoint: httpUrl.optional(),
      prefix: z.string().max(1024).optional(),
      forcePathStyle: z.boolean().optional(),
      credentials: awsCredentials,
    })
    .strict(),
  sender: { kind: 'client', open: async (c, k, o) => (await import('../senders/object-storage.ts')).createObjectStorageSender(c, k, o) },
});
