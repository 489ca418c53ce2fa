import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { awsCallOptions, awsClientConfig, awsFailure, awsStatus, type AwsCredentials } from './aws-client.ts';
import { refusedLiteralHost } from '../../outbound/address-guard.ts';
import { elapsedSince, type DestinationSend, type DestinationSender, type SenderOptions } from './types.ts';

export interface ObjectStorageConfig {
  bucket: string;
  region?: string;
  endpoint?: string;
  prefix?: string;
  forcePathStyle?: boolean;
}

const EXTENSIONS: Record<string, string> = {
  'application/json': '.json',
  'text/plain': '.txt',
  'text/html': '.html',
  'text/csv': '.csv',
  'application/xml': '.xml',
  'text/xml': '.xml',
};

/** `${prefix}${webhookId}/${eventId}/${deliveryId}`, plus an extension for common content types. */
export function objectKey(prefix: string | undefined, req: Pick<DestinationSend, 'ids' | 'dispatch'>): string {
  const mediaType = (req.dispatch.contentType ?? '').split(';')[0].trim().toLowerCase();
  const ext = EXTENSIONS[mediaType] ?? (mediaType.endsWith('+json') ? '.json' : mediaType.endsWith('+xml') ? '.xml' : '');
  return `${prefix ?? ''}${req.ids.webhookId}/${req.ids.eventId}/${req.ids.deliveryId}${ext}`;
}

/**
 * PutObject, one object per delivery (a retry overwrites its own object): the bytes, their
 * content type, and the signing headers as user metadata (x-amz-meta-webhook-id, ...).
 */
export function createObjectStorageSender(config: ObjectStorageConfig, credentials: AwsCredentials | null, opts: SenderOptions): DestinationSender {
  const refused = refusedLiteralHost(config.endpoint, opts.allowPrivate);
  const client = new S3Client({
    ...awsClientConfig({ region: config.region ?? 'us-east-1', endpoint: config.endpoint, credentials, allowPrivate: opts.allowPrivate }),
    forcePathStyle: config.forcePathStyle ?? false,
    // S3-compatible stores do not all know the newer default checksums; a Buffer body needs none.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return {
    async send(req) {
      if (refused) return { durationMs: 0, error: `S3 PutObject: ${refused}`, failure: 'blocked' };
      const started = performance.now();
      const key = objectKey(config.prefix, req);
      try {
        const out = await client.send(
          new PutObjectCommand({
            Bucket: config.bucket,
            Key: key,
            Body: req.dispatch.body,
            ContentLength: req.dispatch.body.length,
            ContentType: req.dispatch.contentType ?? 'application/octet-stream',
            Metadata: req.signing,
          }),
          awsCallOptions(req.timeoutMs),
        );
        return { durationMs: elapsedSince(started), statusCode: awsStatus(out) ?? 200, snippet: `ETag=${out.ETag} Key=${key}` };
      } catch (err) {
        return awsFailure('S3 PutObject', err, elapsedSince(started), req.timeoutMs);
      }
    },
    async close() {
      client.destroy();
    },
  };
}
