import { builder } from '../graphql/builder.ts';
import { getProviderConfig, listProviders, setProviderConfig, type ProviderConfigView } from './service.ts';

type ProviderInfo = ReturnType<typeof listProviders>[number];

const ProviderRef = builder.objectRef<ProviderInfo>('Provider').implement({
  description: 'A provider whose own signature scheme ingest can verify (a provider pack).',
  fields: (t) => ({
    id: t.exposeString('id', { description: 'The name to set with setWebhookProvider.' }),
    name: t.exposeString('name'),
    secretDescription: t.string({ description: 'What to set as the secret, in the provider\'s words.', resolve: (p) => p.secret }),
    header: t.exposeString('header', { description: 'Where the signature travels.' }),
    scheme: t.exposeString('scheme'),
    toleranceSeconds: t.exposeInt('toleranceSeconds', { nullable: true, description: 'Default timestamp tolerance; null when the scheme signs no timestamp.' }),
    eventType: t.exposeStringList('eventType', { description: 'Where the routing context\'s eventType is read, first match wins.' }),
    deliveryId: t.exposeStringList('deliveryId', { description: 'Where the deduplication key (the provider\'s delivery id) is read, first match wins.' }),
  }),
});

const ProviderListRef = builder.objectRef<{ items: ProviderInfo[] }>('ProviderList').implement({
  fields: (t) => ({ items: t.field({ type: [ProviderRef], resolve: (p) => p.items }) }),
});

const ProviderConfigRef = builder.objectRef<ProviderConfigView>('WebhookProvider').implement({
  description: "A webhook's provider pack, without its secret.",
  fields: (t) => ({
    webhookId: t.exposeID('webhookId'),
    provider: t.exposeString('provider', { nullable: true, description: 'null when the webhook has no provider pack.' }),
    toleranceSeconds: t.exposeInt('toleranceSeconds', { nullable: true, description: "The timestamp tolerance in force (as set, else the provider's default); null when the scheme signs no timestamp." }),
  }),
});

builder.queryField('providers', (t) =>
  t.field({
    type: ProviderListRef,
    description: 'The supported provider packs.',
    resolve: () => ({ items: listProviders() }),
  }),
);

builder.queryField('webhookProvider', (t) =>
  t.field({
    type: ProviderConfigRef,
    description: "The webhook's provider pack, never its secret; provider null when it has none.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => getProviderConfig(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.mutationField('setWebhookProvider', (t) =>
  t.field({
    type: ProviderConfigRef,
    description:
      'Sets the webhook\'s provider pack (Starter and above): ingest then also verifies that provider\'s own signature. {provider: null} removes it. The secret is kept sealed and never shown; left out, the stored one is kept when the provider stays the same. A new secret for the same provider keeps the previous one valid for graceSeconds (both verify); its versions are listed by webhookSecrets (kind provider).',
    args: {
      id: t.arg.id({ required: true }),
      provider: t.arg.string({ required: false, description: 'One of providers { items { id } }, or null to remove.' }),
      secret: t.arg.string({ required: false, description: "The provider's secret (or public key, for Discord and SendGrid)." }),
      toleranceSeconds: t.arg.int({ required: false, description: "Timestamp tolerance, 1..86400 seconds; null or left out: the provider's default." }),
      graceSeconds: t.arg.int({
        required: false,
        description: 'With a new secret for the same provider: how long the previous secret stays valid beside it, 0..2592000 seconds (default 86400; 0 drops it at once). Another provider drops the old secret at once.',
      }),
    },
    resolve: (_root, { id, ...input }, ctx) => setProviderConfig(ctx.rt, ctx.auth.projectId, String(id), input),
  }),
);
