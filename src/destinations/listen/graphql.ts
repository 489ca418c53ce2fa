import { builder } from '../../graphql/builder.ts';
import { DestinationRef } from '../graphql.ts';
import { listenHub, type ListenEvent } from './hub.ts';
import { listenDestination } from './listen-destination.ts';
import { destinationsListenedTo } from './sessions.ts';
import type { HandoffRequest } from './wire.ts';

const ListenDeliveryRef = builder.objectRef<HandoffRequest>('ListenDelivery').implement({
  description: 'One delivery handed to a relay listen session: the exact request the server would have sent. Answer it with answerListenDelivery.',
  fields: (t) => ({
    handoffId: t.exposeID('id', { description: 'Names this hand-off in answerListenDelivery.' }),
    deliveryId: t.exposeID('deliveryId'),
    eventId: t.exposeID('eventId'),
    webhookId: t.exposeID('webhookId'),
    method: t.exposeString('method'),
    headers: t.field({ type: 'JSON', description: 'Every header to send: content type, custom headers, the Standard Webhooks signature.', resolve: (d) => d.headers }),
    bodyBase64: t.exposeString('bodyBase64'),
    timeoutMs: t.exposeInt('timeoutMs', { description: 'How long the attempt waits for the answer, from the hand-off on; a later answer is ignored.' }),
  }),
});

const ListenEventRef = builder.objectRef<ListenEvent>('ListenEvent').implement({
  fields: (t) => ({
    type: t.exposeString('type', { description: 'ready (first, once the session takes deliveries) or delivery.' }),
    sessionId: t.exposeID('sessionId'),
    webhookId: t.id({ resolve: (e) => e.destination.webhookId }),
    destination: t.field({ type: DestinationRef, description: 'The cli destination the session takes deliveries of.', resolve: (e) => e.destination }),
    delivery: t.field({ type: ListenDeliveryRef, nullable: true, resolve: (e) => (e.type === 'delivery' ? e.delivery : null) }),
  }),
});

builder.subscriptionField('listen', (t) =>
  t.field({
    type: ListenEventRef,
    description:
      "A relay listen session (CONTRACT §13): the deliveries of the webhook's cli destination (the default one when destinationId is left out), " +
      'each to be sent from the developer\'s machine and answered with answerListenDelivery. Sessions of one destination take its deliveries in turn.',
    args: { webhookId: t.arg.id({ required: true }), destinationId: t.arg.id({ required: false }) },
    subscribe: async (_r, a, ctx) => {
      const destination = await listenDestination(ctx.rt, ctx.auth.projectId, String(a.webhookId), a.destinationId ? String(a.destinationId) : null);
      const { events } = await listenHub(ctx.rt).open(ctx.auth.projectId, destination);
      return events;
    },
    resolve: (e) => e,
  }),
);

builder.mutationField('answerListenDelivery', (t) =>
  t.boolean({
    description:
      "A listen session's answer to one hand-off: what the local server answered (statusCode, durationMs, responseSnippet, retryAfter), or why it could not be reached (error, failure network or timeout). " +
      'Sent on the session\'s own connection. False when the hand-off is not the session\'s or its timeout has passed (the attempt was recorded as a timeout).',
    args: {
      sessionId: t.arg.id({ required: true }),
      handoffId: t.arg.id({ required: true }),
      statusCode: t.arg.int({ required: false }),
      durationMs: t.arg.int({ required: true }),
      error: t.arg.string({ required: false }),
      failure: t.arg.string({ required: false, description: 'network or timeout, with error.' }),
      responseSnippet: t.arg.string({ required: false }),
      retryAfter: t.arg.string({ required: false }),
    },
    resolve: (_r, a, ctx) =>
      listenHub(ctx.rt).report(ctx.auth.projectId, String(a.sessionId), String(a.handoffId), {
        statusCode: a.statusCode,
        durationMs: a.durationMs,
        error: a.error,
        failure: a.failure === 'timeout' ? 'timeout' : a.failure ? 'network' : null,
        snippet: a.responseSnippet,
        retryAfter: a.retryAfter,
      }),
  }),
);

// Whether a session listens: on the Destination type, so REST (SOFA), GraphQL and the dashboard show it alike.
builder.objectField(DestinationRef, 'listenerConnected', (t) =>
  t.boolean({
    description: 'cli destinations: whether a relay listen session takes its deliveries now. Always false for other types.',
    resolve: async (d, _a, ctx) => d.type === 'cli' && (await destinationsListenedTo(ctx.rt.db.pool, [d.id])).has(d.id),
  }),
);
