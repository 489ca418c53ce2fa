import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const require = createRequire(import.meta.url);

/** One Publish request as the Pub/Sub client sent it. */
export interface PublishCall {
  topic: string;
  /** The call's :authority, the endpoint host as the client named it. */
  host: string;
  messages: { data: Buffer; attributes: Record<string, string> }[];
  at: number;
}

export type PublishReply = { ok: true } | { code: grpc.status; details: string };

/**
 * A loopback gRPC server implementing google.pubsub.v1.Publisher/Publish from the pubsub.proto
 * that @google-cloud/pubsub ships, as an emulator would: the SDK reaches it through an http://
 * endpoint. Answers each Publish by `reply(call, n)` (1-based) and records it.
 */
export async function startPubSubServer(reply: (call: PublishCall, n: number) => PublishReply = () => ({ ok: true })) {
  const pubsubRoot = path.dirname(require.resolve('@google-cloud/pubsub/package.json'));
  // google-gax (the client's transport) ships the google/api protos pubsub.proto imports; it exports no package.json.
  const gaxMain = createRequire(path.join(pubsubRoot, 'package.json')).resolve('google-gax');
  const gaxRoot = gaxMain.slice(0, gaxMain.lastIndexOf(`${path.sep}build${path.sep}`));
  const definition = protoLoader.loadSync('google/pubsub/v1/pubsub.proto', {
    includeDirs: [path.join(pubsubRoot, 'build/protos'), path.join(gaxRoot, 'build/protos')],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const proto = grpc.loadPackageDefinition(definition) as any;
  const calls: PublishCall[] = [];
  let next = 1;
  const server = new grpc.Server();
  server.addService(proto.google.pubsub.v1.Publisher.service, {
    Publish(call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) {
      const req = call.request;
      const recorded: PublishCall = {
        topic: req.topic,
        host: call.getHost(),
        messages: req.messages.map((m: any) => ({ data: Buffer.from(m.data), attributes: { ...m.attributes } })),
        at: Date.now(),
      };
      calls.push(recorded);
      const r = reply(recorded, calls.length);
      if ('code' in r) return callback({ code: r.code, details: r.details });
      callback(null, { message_ids: recorded.messages.map(() => String(next++)) });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
