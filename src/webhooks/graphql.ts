import type { ArgBuilder } from '@pothos/core';
import type { Webhook } from '../generated/prisma/client.ts';
import type { PrismaModelTypes } from '@pothos/plugin-prisma';
import type PrismaTypes from '../generated/pothos-types.ts';
import { builder, type BuilderTypes as Types, type GraphQLContext } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { FEATURE_TIERS } from '../projects/tiers.ts';
import { DestinationRef } from '../destinations/graphql.ts';
import type { RoutingRule } from '../routing/rules.ts';
import { RoutingRuleRef } from '../routing/graphql.ts';
import { webhookAddresses } from './addresses.ts';
import type { RetryPolicy } from '../webhook-config/retry-policy.ts';
import { createWebhook, type CreateWebhookInput } from './create-webhook.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { archiveWebhook, destroyWebhook, pauseWebhook, restoreWebhook, resumeWebhook } from './lifecycle.ts';
import { listWebhooks } from './list-webhooks.ts';
import { listSecretVersions, rotateSecret } from '../webhook-config/secrets.ts';
import { testDelivery } from './test-delivery.ts';
import { getTransform, setTransform } from './transform.ts';
import { type TransformView } from '../webhook-config/transform.ts';
import { updateWebhook } from './update-webhook.ts';
import { addEmailAllowlistEntry, deleteEmailAllowlistEntry, listEmailAllowlist, type EmailAllowlistEntryView } from './email-allowlist.ts';


export const WebhookStatusEnum = builder.enumType('WebhookStatus', { values: ['active', 'paused', 'archived'] as const });
export const DeliveryModeEnum = builder.enumType('DeliveryMode', { values: ['parallel', 'strict_fifo'] as const });
// Stored as text; the service writes only these values.
type WebhookStatus = (typeof WebhookStatusEnum)['$inferType'];
type DeliveryMode = (typeof DeliveryModeEnum)['$inferType'];

const RetryPolicyRef = builder.objectRef<RetryPolicy>('RetryPolicy').implement({
  fields: (t) => ({
    maxAttempts: t.exposeInt('maxAttempts'),
    backoff: t.exposeString('backoff', { description: 'exponential, linear or fixed' }),
    initialDelayMs: t.exposeInt('initialDelayMs'),
    maxDelayMs: t.exposeInt('maxDelayMs'),
    jitter: t.exposeBoolean('jitter'),
    retryOn: t.exposeStringList('retryOn', { description: 'Failures that are retried: 408, 429, 5xx, network, timeout. Any other non-2xx answer is terminal.' }),
  }),
});

// Shared by the Webhook type and its CreatedWebhook variant.
function webhookFields(t: PothosSchemaTypes.PrismaObjectFieldBuilder<Types, PrismaModelTypes & PrismaTypes['Webhook'], Webhook>) {
  const addresses = (w: Webhook, ctx: GraphQLContext) => webhookAddresses(ctx.rt.config, w.publicId);
  return {
    id: t.exposeID('id'),
    publicId: t.exposeString('publicId'),
    name: t.exposeString('name'),
    status: t.field({ type: WebhookStatusEnum, resolve: (w) => w.status as WebhookStatus }),
    ingestUrl: t.string({ resolve: (w: Webhook, _a: unknown, ctx: GraphQLContext) => addresses(w, ctx).ingestUrl }),
    formIngestUrl: t.string({ resolve: (w: Webhook, _a: unknown, ctx: GraphQLContext) => addresses(w, ctx).formIngestUrl }),
    emailIngestAddress: t.string({ resolve: (w: Webhook, _a: unknown, ctx: GraphQLContext) => addresses(w, ctx).emailIngestAddress }),
    deliveryMode: t.field({ type: DeliveryModeEnum, resolve: (w) => w.deliveryMode as DeliveryMode }),
    maxInFlight: t.exposeInt('maxInFlight'),
    timeoutMs: t.exposeInt('timeoutMs'),
    retryPolicy: t.field({ type: RetryPolicyRef, resolve: (w: Webhook) => w.retryPolicy as unknown as RetryPolicy }),
    defaultDelaySeconds: t.exposeInt('defaultDelaySeconds', { nullable: true }),
    throttleRatePerSecond: t.exposeInt('throttleRatePerSecond', { nullable: true }),
    customHeaders: t.field({ type: 'JSON', resolve: (w: Webhook) => w.customHeaders }),
    dedupeWindowSeconds: t.exposeInt('dedupeWindowSeconds', { description: "Inbound deduplication by the provider's delivery id, in seconds (0: off)." }),
    idempotencyWindowSeconds: t.exposeInt('idempotencyWindowSeconds', { description: 'How long accepted Idempotency-Keys are remembered, in seconds (default 86400; 0: recorded on the delivery, never enforced).' }),
    formAccess: t.exposeString('formAccess', { description: 'Form ingest: secret (the ingest secret is required, default) or public (the publicId in the URL is the credential).' }),
    formAllowedOrigins: t.stringList({ description: 'Origins a browser may post the form from: ["*"] (default) or exact origins (scheme://host[:port]).', resolve: (w: Webhook) => w.formAllowedOrigins ?? ['*'] }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  };
}

export const WebhookRef = builder.prismaObject('Webhook', { fields: (t) => webhookFields(t) });

type WithSecrets = Webhook & { ingestSecret: string; signingSecret: string };
const CreatedWebhookRef = builder.prismaObject('Webhook', {
  variant: 'CreatedWebhook',
  description: 'A webhook just created: the only answer that shows both secrets.',
  fields: (t) => ({
    ...webhookFields(t),
    ingestSecret: t.string({ description: 'Shown only on create and on rotation.', resolve: (w) => (w as WithSecrets).ingestSecret }),
    signingSecret: t.string({ description: 'Shown only on create and on rotation.', resolve: (w) => (w as WithSecrets).signingSecret }),
  }),
});

const WebhookPageRef = pageOf<Webhook>('WebhookPage', WebhookRef);

const WebhookDestroyedRef = builder.objectRef<{ id: string; deleted: boolean }>('WebhookDestroyed').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});

type Version = { kind: string; version: number; createdAt: Date; expiresAt: Date | null; state: string };
const SecretVersionRef = builder.objectRef<Version>('WebhookSecretVersion').implement({
  fields: (t) => ({
    kind: t.exposeString('kind', { description: "ingest, signing, or provider (the provider pack's secret)" }),
    version: t.exposeInt('version'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', nullable: true, description: 'null for the current version' }),
    state: t.exposeString('state', { description: 'current, grace or expired' }),
  }),
});
const SecretVersionsRef = builder.objectRef<{ items: Version[] }>('WebhookSecretVersions').implement({
  fields: (t) => ({ items: t.field({ type: [SecretVersionRef], resolve: (p) => p.items }) }),
});

type Rotation = Awaited<ReturnType<typeof rotateSecret>>;
function rotationRef(name: string, secretField: 'ingestSecret' | 'signingSecret') {
  return builder.objectRef<Rotation>(name).implement({
    fields: (t) => ({
      webhookId: t.exposeID('webhookId'),
      kind: t.exposeString('kind'),
      version: t.exposeInt('version', { description: 'Version of the new secret.' }),
      createdAt: t.expose('createdAt', { type: 'DateTime' }),
      previousExpiresAt: t.expose('previousExpiresAt', { type: 'DateTime', description: 'End of the grace period of the version it replaced.' }),
      [secretField]: t.string({ description: 'The new secret. Shown only here.', resolve: (r) => r.secret }),
    }),
  });
}
const IngestRotationRef = rotationRef('IngestSecretRotation', 'ingestSecret');
const SigningRotationRef = rotationRef('SigningSecretRotation', 'signingSecret');

const TransformRef = builder.objectRef<TransformView>('WebhookTransform').implement({
  fields: (t) => ({
    kind: t.exposeString('kind', { nullable: true, description: 'jsonata, automation, or null when the webhook has no transform' }),
    expression: t.exposeString('expression', { nullable: true }),
    automationId: t.string({ nullable: true, description: 'kind automation: the Automation that runs.', resolve: (v) => v.automationId ?? null }),
    version: t.int({ nullable: true, description: 'kind automation: its pinned version.', resolve: (v) => v.version ?? null }),
  }),
});

type Probe = Awaited<ReturnType<typeof testDelivery>>;
const TestDeliveryRef = builder.objectRef<Probe>('TestDeliveryResult').implement({
  fields: (t) => ({
    destination: t.field({ type: DestinationRef, resolve: (p) => p.destination }),
    matchedRule: t.field({ type: RoutingRuleRef, nullable: true, resolve: (p) => p.matchedRule as RoutingRule | null }),
    transformed: t.exposeBoolean('transformed', { description: 'Whether the webhook has a transform that was applied.' }),
    payload: t.field({ type: 'JSON', nullable: true, description: 'The payload that would be sent: the transform output, else the body.', resolve: (p) => p.payload }),
    transformError: t.exposeString('transformError', { nullable: true }),
    dropped: t.boolean({ description: 'An Automation transform returned null: the event would not be delivered (the delivery would end cancelled).', resolve: (p) => p.dropped ?? false }),
    automationRunId: t.string({ nullable: true, description: "The Automation transform's run (see GET /v1/automations/{id}/runs).", resolve: (p) => p.automationRunId ?? null }),
  }),
});

const EmailAllowlistEntryRef = builder.objectRef<EmailAllowlistEntryView>('EmailAllowlistEntry').implement({
  description: "A sender pattern a webhook's email ingest takes (CONTRACT §12): an address, a domain (example.com), or a local part on any domain (alerts@*); stored lower-cased.",
  fields: (t) => ({
    id: t.exposeID('id'),
    pattern: t.exposeString('pattern'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});
const EmailAllowlistPageRef = pageOf<EmailAllowlistEntryView>('EmailAllowlistPage', EmailAllowlistEntryRef);
const EmailAllowlistDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('EmailAllowlistEntryDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});

builder.queryField('webhookEmailAllowlist', (t) =>
  t.field({
    type: EmailAllowlistPageRef,
    description: "The senders the webhook's email ingest takes, oldest first (cursor-paginated; every tier). Empty: every sender. Mail from a sender a non-empty list does not match is answered 250 and dropped.",
    args: { id: t.arg.id({ required: true }), ...pageArgs },
    resolve: (_root, args, ctx) => listEmailAllowlist(ctx.rt, ctx.auth.projectId, String(args.id), args),
  }),
);

builder.queryField('webhookEmailAllowlistConnection', (t) =>
  t.connection({
    type: EmailAllowlistEntryRef,
    description: "The senders the webhook's email ingest takes, oldest first, as a Relay connection.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => connectionOf(await listEmailAllowlist(ctx.rt, ctx.auth.projectId, String(args.id), pageRequestOf(args))),
  }),
);

builder.mutationField('addEmailAllowlistEntry', (t) =>
  t.field({
    type: EmailAllowlistEntryRef,
    description: `Adds a sender pattern ${from('email_allowlists')}: an address (ana@example.com), a domain (example.com or *@example.com; not its subdomains) or a local part on any domain (alerts@*). Matched case-insensitively against the From: address (else MAIL FROM). The same pattern twice is 409 already_exists.`,
    args: { id: t.arg.id({ required: true }), pattern: t.arg.string({ required: true, description: 'At most 254 characters, no spaces, at most one @.' }) },
    resolve: (_root, args, ctx) => addEmailAllowlistEntry(ctx.rt, ctx.auth.projectId, String(args.id), args.pattern),
  }),
);

builder.mutationField('deleteEmailAllowlistEntry', (t) =>
  t.field({
    type: EmailAllowlistDeletedRef,
    description: `Removes a sender pattern ${from('email_allowlists')}; the next mail sees the change.`,
    args: { id: t.arg.id({ required: true }), entryId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteEmailAllowlistEntry(ctx.rt, ctx.auth.projectId, String(args.id), String(args.entryId)),
  }),
);

// ---------------------------------------------------------------- queries

builder.queryField('webhooks', (t) =>
  t.field({
    type: WebhookPageRef,
    description: 'Webhooks of the project, newest first (cursor-paginated; the cursor is bound to the status filter).',
    args: { status: t.arg({ type: WebhookStatusEnum, required: false }), limit: t.arg.int({ required: false }), cursor: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) => listWebhooks(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.queryField('webhooksConnection', (t) =>
  t.connection({
    type: WebhookRef,
    description: 'Webhooks of the project, newest first, as a Relay connection (the cursors are bound to the status filter).',
    args: { status: t.arg({ type: WebhookStatusEnum, required: false }) },
    resolve: async (_root, args, ctx) => connectionOf(await listWebhooks(ctx.rt, ctx.auth.projectId, { ...pageRequestOf(args), status: args.status })),
  }),
);

builder.queryField('webhook', (t) =>
  t.prismaField({
    type: 'Webhook',
    description: 'One webhook, without its secrets.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_q, _root, args, ctx) => getWebhook(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.queryField('webhookSecrets', (t) =>
  t.field({
    type: SecretVersionsRef,
    description: "Every version of the ingest, signing and provider pack secrets, never the secrets themselves.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => ({ items: await listSecretVersions(ctx.rt, ctx.auth.projectId, String(args.id)) }),
  }),
);

builder.queryField('webhookTransform', (t) =>
  t.field({
    type: TransformRef,
    description: "The webhook's transform; kind null when it has none.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => getTransform(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

// ---------------------------------------------------------------- mutations

/** "(Pro and above)": the tier a control needs, as the gates check it. */
const from = (feature: keyof typeof FEATURE_TIERS) => `(${FEATURE_TIERS[feature][0].toUpperCase()}${FEATURE_TIERS[feature].slice(1)} and above)`;

const controlArgs = (t: ArgBuilder<Types>) => ({
  name: t.string({ required: false, description: 'A name for people.' }),
  url: t.string({ required: false, description: 'The default destination: a webhook destination posting to this URL.' }),
  destination: t({ type: 'JSON', required: false, description: 'The default destination as a whole: {name?, type, config}.' }),
  deliveryMode: t({ type: DeliveryModeEnum, required: false, description: `parallel (default) or strict_fifo ${from('strict_fifo')}: one delivery at a time, in order.` }),
  maxInFlight: t.int({ required: false, description: 'Attempts in flight at once, 1..100 (default 10).' }),
  timeoutMs: t.int({ required: false, description: 'Timeout of one attempt in ms, 1000..60000 (default 10000).' }),
  retryPolicy: t({ type: 'JSON', required: false, description: `{maxAttempts, backoff, initialDelayMs, maxDelayMs, jitter, retryOn}; left-out fields take the defaults. Other than the default ${from('custom_retry_policy')}.` }),
  defaultDelaySeconds: t.int({ required: false, description: `Delay before each delivery, 0..604800 seconds ${from('default_delay')}; null for none.` }),
  throttleRatePerSecond: t.int({ required: false, description: `At most this many deliveries a second, 1..1000 ${from('throttling')}; null for no limit.` }),
  customHeaders: t({ type: 'JSON', required: false, description: `Headers added to every delivery: {"name": "value"} ${from('custom_headers')}.` }),
  dedupeWindowSeconds: t.int({
    required: false,
    description:
      "Inbound deduplication, 0..604800 seconds (default 0: off): a request whose provider delivery id (Stripe event id, GitHub x-github-delivery, Standard Webhooks webhook-id, …) was accepted within the window is answered 202 with the original eventId and status duplicate, and stored nowhere. null: off.",
  }),
  idempotencyWindowSeconds: t.int({
    required: false,
    description:
      'How long accepted Idempotency-Keys (or authenticating Standard Webhooks webhook-ids) are remembered, 0..604800 seconds (default 86400): a retry with the same key and body answers 202 with the first eventId and deliveryId and status duplicate; another body is 422 idempotency_key_reused. 0: the key is recorded on the delivery, never enforced. null: the default.',
  }),
  formAccess: t.string({ required: false, description: 'Form ingest: secret (default; the ingest secret is required, as on HTTP ingest) or public (the publicId in the URL is the credential; quotas, honeypot and caps apply).' }),
  formAllowedOrigins: t.stringList({
    required: false,
    description: 'Origins a browser may post the form from: ["*"] (default) or exact origins such as https://www.example.com (scheme://host[:port], no path, no trailing slash). A post from an origin not listed is 403 origin_not_allowed.',
  }),
});

builder.mutationField('createWebhook', (t) =>
  t.prismaField({
    type: CreatedWebhookRef,
    description: 'Creates a webhook (active) with its ingest addresses and both secrets. Unset controls take their defaults; a control above the tier is 403 tier_required.',
    args: controlArgs(t.arg),
    resolve: (_q, _root, args, ctx) => createWebhook(ctx.rt, ctx.auth.projectId, args as CreateWebhookInput),
  }),
);

builder.mutationField('updateWebhook', (t) =>
  t.prismaField({
    type: 'Webhook',
    description: "Changes a webhook's name, default destination or controls; fields left out keep their values.",
    args: { id: t.arg.id({ required: true }), ...controlArgs(t.arg) },
    resolve: (_q, _root, { id, ...input }, ctx) => updateWebhook(ctx.rt, ctx.auth.projectId, String(id), input as CreateWebhookInput),
  }),
);

for (const [field, action, description] of [
  ['pauseWebhook', pauseWebhook, 'Pauses an active webhook: ingest answers 409 webhook_paused and deliveries wait until it is resumed.'],
  ['resumeWebhook', resumeWebhook, 'Resumes a paused webhook; the deliveries that waited run.'],
  ['archiveWebhook', archiveWebhook, 'Archives an active or paused webhook: ingest answers 404; its history stays readable.'],
  ['restoreWebhook', restoreWebhook, 'Restores an archived webhook; it comes back paused.'],
] as const) {
  builder.mutationField(field, (t) =>
    t.prismaField({
      type: 'Webhook',
      description,
      args: { id: t.arg.id({ required: true }) },
      resolve: (_q, _root, args, ctx) => action(ctx.rt, ctx.auth.projectId, String(args.id)),
    }),
  );
}

builder.mutationField('destroyWebhook', (t) =>
  t.field({
    type: WebhookDestroyedRef,
    description: 'Removes an archived webhook and everything under it. Cannot be undone.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => destroyWebhook(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.mutationField('rotateIngestSecret', (t) =>
  t.field({
    type: IngestRotationRef,
    description: 'Creates a new ingest secret, shown once in the answer; the previous one stays valid for graceSeconds.',
    args: { id: t.arg.id({ required: true }), graceSeconds: t.arg.int({ required: false, description: 'Default 86400.' }) },
    resolve: (_root, args, ctx) => rotateSecret(ctx.rt, ctx.auth.projectId, String(args.id), 'ingest', args.graceSeconds),
  }),
);

builder.mutationField('rotateSigningSecret', (t) =>
  t.field({
    type: SigningRotationRef,
    description: 'Creates a new signing secret, shown once in the answer; deliveries carry signatures by both for graceSeconds.',
    args: { id: t.arg.id({ required: true }), graceSeconds: t.arg.int({ required: false, description: 'Default 86400.' }) },
    resolve: (_root, args, ctx) => rotateSecret(ctx.rt, ctx.auth.projectId, String(args.id), 'signing', args.graceSeconds),
  }),
);

builder.mutationField('setWebhookTransform', (t) =>
  t.field({
    type: TransformRef,
    description: 'Sets or removes the webhook\'s transform. {kind:"jsonata", expression} sets the classic transform; {kind:"automation", automationId, version?} pins an Automation version (the latest when left out); both Starter and above. {kind:null} removes it.',
    args: {
      id: t.arg.id({ required: true }),
      kind: t.arg.string({ required: false }),
      expression: t.arg.string({ required: false }),
      automationId: t.arg.string({ required: false }),
      version: t.arg.int({ required: false }),
    },
    resolve: (_root, { id, ...input }, ctx) => setTransform(ctx.rt, ctx.auth.projectId, String(id), input),
  }),
);

builder.mutationField('testWebhookDelivery', (t) =>
  t.field({
    type: TestDeliveryRef,
    description: 'Evaluates routing and the saved transform against a probe context; stores no delivery. An Automation transform really runs (subrequests included) and its run is recorded and counted.',
    args: {
      id: t.arg.id({ required: true }),
      channel: t.arg.string({ required: false }),
      method: t.arg.string({ required: false }),
      path: t.arg.string({ required: false }),
      query: t.arg({ type: 'JSON', required: false }),
      headers: t.arg({ type: 'JSON', required: false }),
      contentType: t.arg.string({ required: false }),
      body: t.arg({ type: 'JSON', required: false }),
    },
    resolve: (_root, { id, ...probe }, ctx) => testDelivery(ctx.rt, ctx.auth.projectId, String(id), probe),
  }),
);
