import { builder } from '../graphql/builder.ts';
import { eventFiles, getFileMetadata, type FileMetadata } from './service.ts';

export const FileMetadataRef = builder.objectRef<FileMetadata>('FileMetadata').implement({
  description: 'A file that came with a form post or an email, whose content the project keeps (Starter and above). Its bytes: `GET /v1/files/{id}`.',
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeString('webhookId'),
    eventId: t.exposeString('eventId'),
    filename: t.exposeString('filename'),
    contentType: t.exposeString('contentType'),
    size: t.field({ type: 'SafeInt', description: 'Bytes.', resolve: (f) => f.size }),
    sha256: t.exposeString('sha256', { description: 'Hex SHA-256 of the content.' }),
    createdAt: t.field({ type: 'DateTime', resolve: (f) => f.createdAt }),
    expiresAt: t.field({ type: 'DateTime', nullable: true, description: 'When payload retention removes the content (then 410 payload_gone).', resolve: (f) => f.expiresAt }),
  }),
});

builder.queryFields((t) => ({
  fileMetadata: t.field({
    type: FileMetadataRef,
    description: "A stored file's metadata (404 for another project's file).",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, a, ctx) => getFileMetadata(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  eventFiles: t.field({
    type: [FileMetadataRef],
    description: 'The stored files of one event (form or email), oldest first; empty when none were kept.',
    args: { eventId: t.arg.id({ required: true }) },
    resolve: (_r, a, ctx) => eventFiles(ctx.rt, ctx.auth.projectId, String(a.eventId)),
  }),
}));
