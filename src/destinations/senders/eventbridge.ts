import { isUtf8 } from 'node:buffer';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { awsCallOptions, awsClientConfig, awsFailure, awsStatus, type AwsCredentials } from './aws-client.ts';
import { refusedLiteralHost } from '../../outbound/address-guard.ts';
import { elapsedSince, type DestinationSend, type DestinationSender, type SenderOptions } from './types.ts';

export interface EventBridgeConfig {
  eventBusName: string;
  region: string;
  source: string;
  detailType: string;
  endpoint?: string;
}

/** Entry error codes worth another attempt; the status they are recorded with (the call itself answered 200). */
const RETRYABLE_ENTRY_ERRORS: Record<string, number> = { ThrottlingException: 429, InternalFailure: 500, InternalException: 500 };
const ENTRY_ERROR_STATUS = 400;

/** The event's detail: the body itself when it is a JSON object, else the bytes in base64 with their content type. */
export function eventBridgeDetail(body: Buffer, contentType: string | null): string {
  if (isUtf8(body)) {
    const text = body.toString('utf8');
    try {
      const parsed = JSON.parse(text);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return text;
    } catch {
      /* not JSON: wrapped below */
    }
  }
  return JSON.stringify({ data: body.toString('base64'), contentType });
}

/**
 * PutEvents with one entry. EventBridge answers 200 even when it refuses the entry: the entry's
 * ErrorCode makes it a failure (throttling and internal failures retryable, the rest terminal).
 * EventBridge has no per-event attributes, so the signing headers do not travel; the event's
 * Time is the webhook-timestamp.
 */
export function createEventBridgeSender(config: EventBridgeConfig, credentials: AwsCredentials | null, opts: SenderOptions): DestinationSender {
  const refused = refusedLiteralHost(config.endpoint, opts.allowPrivate);
  const client = new EventBridgeClient(awsClientConfig({ region: config.region, endpoint: config.endpoint, credentials, allowPrivate: opts.allowPrivate }));
  return {
    async send(req) {
      if (refused) return { durationMs: 0, error: `EventBridge PutEvents: ${refused}`, failure: 'blocked' };
      const started = performance.now();
      const timestamp = Number(req.signing['webhook-timestamp']);
      try {
        const out = await client.send(
          new PutEventsCommand({
            Entries: [
              {
                EventBusName: config.eventBusName,
                Source: config.source,
                DetailType: config.detailType,
                Detail: eventBridgeDetail(req.dispatch.body, req.dispatch.contentType),
                ...(Number.isFinite(timestamp) ? { Time: new Date(timestamp * 1000) } : {}),
              },
            ],
          }),
          awsCallOptions(req.timeoutMs),
        );
        const durationMs = elapsedSince(started);
        const entry = out.Entries?.[0];
        if (entry?.ErrorCode || (out.FailedEntryCount ?? 0) > 0) {
          const code = entry?.ErrorCode ?? 'UnknownEntryError';
          return {
            durationMs,
            statusCode: RETRYABLE_ENTRY_ERRORS[code] ?? ENTRY_ERROR_STATUS,
            error: `EventBridge PutEvents: entry refused: ${code}: ${entry?.ErrorMessage ?? 'no message'} (HTTP ${awsStatus(out) ?? 200})`,
            snippet: code,
          };
        }
        return { durationMs, statusCode: awsStatus(out) ?? 200, snippet: `EventId=${entry?.EventId}` };
      } catch (err) {
        return awsFailure('EventBridge PutEvents', err, elapsedSince(started), req.timeoutMs);
      }
    },
    async close() {
      client.destroy();
    },
  };
}
