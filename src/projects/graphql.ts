import { builder } from '../graphql/builder.ts';
import { createApiKey, getProject, revokeApiKey } from './service.ts';

export const ProjectRef = builder.prismaObject('Project', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    tier: t.exposeString('tier'),
    overageEnabled: t.exposeBoolean('overageEnabled'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const ApiKeyRef = builder.prismaObject('ApiKey', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix', { description: 'First characters of the key, for recognising it; never the key itself.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
  }),
});

const CreatedApiKey = builder
  .objectRef<{ apiKey: { id: string }; secret: string }>('CreatedApiKey')
  .implement({
    fields: (t) => ({
      apiKey: t.field({ type: ApiKeyRef, resolve: (p) => p.apiKey as any }),
      key: t.string({ description: 'The plaintext key. Shown only once.', resolve: (p) => p.secret }),
    }),
  });

builder.queryField('project', (t) =>
  t.prismaField({
    type: 'Project',
    description: 'The project of the calling API key.',
    resolve: (_query, _root, _args, ctx) => getProject(ctx.rt, ctx.auth.projectId),
  }),
);

builder.queryField('apiKeysConnection', (t) =>
  t.prismaConnection({
    type: 'ApiKey',
    cursor: 'id',
    resolve: (query, _root, _args, ctx) =>
      ctx.rt.db.prisma.apiKey.findMany({ ...query, where: { projectId: ctx.auth.projectId }, orderBy: { id: 'desc' } }),
  }),
);

builder.mutationField('createApiKey', (t) =>
  t.field({
    type: CreatedApiKey,
    args: { name: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) => createApiKey(ctx.rt, ctx.auth.projectId, args.name ?? 'default'),
  }),
);

builder.mutationField('revokeApiKey', (t) =>
  t.prismaField({
    type: 'ApiKey',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_query, _root, args, ctx) => revokeApiKey(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);
