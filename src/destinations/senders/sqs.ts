import { isUtf8 } from 'node:buffer';
import { SendMessageCommand, SQSClient, type MessageAttributeValue } from '@aws-sdk/client-sqs';
import { awsCallOptions, awsClientConfig, awsFailure, awsStatus, type AwsCredentials } from './aws-client.ts';
import { refusedLiteralHost } from '../../outbound/address-guard.ts';
import { elapsedSince, type DestinationSend, type DestinationSender, type SenderOptions } from './types.ts';

export interface SqsConfig {
  queueUrl: string;
  region: string;
  endpoint?: string;
}

// The characters SQS accepts in a message body; anything else (most control characters) it refuses.
const SQS_TEXT = /^[\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u;

/**
 * The message for one delivery: the body as text when SQS can carry it as such, else base64
 * (flagged by a content-transfer-encoding attribute); the signing headers and the content type
 * as string attributes. SQS refuses empty messages: an empty body is sent as one space, with a
 * content-length attribute of 0 saying so.
 */
export function sqsMessage(req: DestinationSend): { body: string; attributes: Record<string, MessageAttributeValue> } {
  const { body, contentType } = req.dispatch;
  const attributes: Record<string, MessageAttributeValue> = {};
  const attr = (name: string, value: string) => (attributes[name] = { DataType: 'String', StringValue: value });
  for (const [k, v] of Object.entries(req.signing)) attr(k, v);
  if (contentType) attr('content-type', contentType);
  if (body.length === 0) {
    attr('content-length', '0');
    return { body: ' ', attributes };
  }
  const text = isUtf8(body) ? body.toString('utf8') : null;
  if (text !== null && SQS_TEXT.test(text)) return { body: text, attributes };
  attr('content-transfer-encoding', 'base64');
  return { body: body.toString('base64'), attributes };
}

/** SendMessage to the configured queue; FIFO queues get the webhook as message group and the delivery as deduplication id. */
export function createSqsSender(config: SqsConfig, credentials: AwsCredentials | null, opts: SenderOptions): DestinationSender {
  // The SDK sends to the queue URL's host unless an endpoint is set: that host is the endpoint to guard.
  const endpoint = config.endpoint ?? new URL(config.queueUrl).origin;
  const refused = refusedLiteralHost(endpoint, opts.allowPrivate);
  const client = new SQSClient(awsClientConfig({ region: config.region, endpoint, credentials, allowPrivate: opts.allowPrivate }));
  const fifo = config.queueUrl.endsWith('.fifo');
  return {
    async send(req) {
      if (refused) return { durationMs: 0, error: `SQS SendMessage: ${refused}`, failure: 'blocked' };
      const started = performance.now();
      const { body, attributes } = sqsMessage(req);
      try {
        const out = await client.send(
          new SendMessageCommand({
            QueueUrl: config.queueUrl,
            MessageBody: body,
            MessageAttributes: attributes,
            ...(fifo ? { MessageGroupId: req.ids.webhookId, MessageDeduplicationId: req.ids.deliveryId } : {}),
          }),
          awsCallOptions(req.timeoutMs),
        );
        return { durationMs: elapsedSince(started), statusCode: awsStatus(out) ?? 200, snippet: `MessageId=${out.MessageId}` };
      } catch (err) {
        return awsFailure('SQS SendMessage', err, elapsedSince(started), req.timeoutMs);
      }
    },
    async close() {
      client.destroy();
    },
  };
}
