import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One call as the AWS SDK sent it (JSON 1.0 / 1.1 protocol: POST /, X-Amz-Target, a JSON body). */
export interface AwsJsonCall {
  target: string;
  input: any;
  headers: http.IncomingHttpHeaders;
  url: string;
  at: number;
}

export type AwsJsonReply = { status: number; body?: unknown; headers?: Record<string, string> };

/**
 * A loopback server speaking the AWS JSON protocol the SDK's SQS and EventBridge clients use,
 * answering each call by `reply(call, n)` (1-based) and recording it. Enough of SQS and
 * EventBridge for the senders: what to answer is the test's choice.
 */
export async function startAwsJsonServer(reply: (call: AwsJsonCall, n: number) => AwsJsonReply) {
  const calls: AwsJsonCall[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const call: AwsJsonCall = { target: String(req.headers['x-amz-target'] ?? ''), input: text ? JSON.parse(text) : {}, headers: req.headers, url: req.url!, at: Date.now() };
      calls.push(call);
      const r = reply(call, calls.length);
      const body = JSON.stringify(r.body ?? {});
      res.writeHead(r.status, {
        'content-type': String(req.headers['content-type'] ?? 'application/x-amz-json-1.0'),
        'x-amzn-requestid': randomUUID(),
        'content-length': String(Buffer.byteLength(body)),
        ...r.headers,
      });
      res.end(body);
    });
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    /** TCP connections accepted so far (a kept client reuses its connection). */
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** SQS SendMessage's answer, with the body checksum the SDK verifies. */
export function sendMessageAnswer(call: AwsJsonCall): AwsJsonReply {
  const md5 = createHash('md5').update(call.input.MessageBody ?? '', 'utf8').digest('hex');
  return { status: 200, body: { MessageId: randomUUID(), MD5OfMessageBody: md5 } };
}

/** An SQS error as the JSON protocol answers it, with the query-compatible code header. */
export function sqsError(status: number, type: string, queryCode: string, message: string): AwsJsonReply {
  return {
    status,
    body: { __type: `com.amazonaws.sqs#${type}`, message },
    headers: { 'x-amzn-query-error': `${queryCode};${status >= 500 ? 'Receiver' : 'Sender'}` },
  };
}

/** EventBridge PutEvents' answer: every entry accepted, or the first refused with `errorCode`. */
export function putEventsAnswer(call: AwsJsonCall, errorCode?: string): AwsJsonReply {
  const entries = (call.input.Entries ?? []).map((_: unknown, i: number) =>
    i === 0 && errorCode ? { ErrorCode: errorCode, ErrorMessage: `entry refused: ${errorCode}` } : { EventId: randomUUID() },
  );
  return { status: 200, body: { FailedEntryCount: errorCode ? 1 : 0, Entries: entries } };
}
