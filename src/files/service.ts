import { createHmac } from 'node:crypto';
import type { Readable } from 'node:stream';
import type pg from 'pg';
import type { Config } from '../config.ts';
import { inTransaction } from '../db/client.ts';
import type { NamedParams } from '../db/named-params.ts';
import { constantTimeEqual, derivedKey } from '../encryption.ts';
import { FileGone, InvalidSignature, NotFound } from '../errors.ts';
import { log } from '../log.ts';
import { countFileStorage, enforceFileStorageQuota, releaseFileStorage } from '../projects/quotas/file-storage.ts';
import { projectQuotas, type ProjectQuotaSource, type WebhookQuotaSource } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { fileStore } from './store.ts';

/** How long a `fileRef.url` is valid (CONTRACT §7). */
export const FILE_LINK_TTL_SECONDS = 7 * 24 * 3600;

/** A kept file as an envelope shows it. */
export interface FileRef {
  id: string;
  url: string;
  expiresAt: string;
}

/** A file about to be recorded with its event (its content already in the store under storageKey). */
export interface NewFile {
  id: string;
  field: string | null;
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  storageKey: string;
}

export interface FileMetadata {
  id: string;
  webhookId: string;
  eventId: string;
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  createdAt: Date;
  expiresAt: Date | null;
}

let linkKey: Buffer | undefined;
const linkSignature = (id: string, expires: number) => createHmac('sha256', (linkKey ??= derivedKey('file-links'))).update(`${id}.${expires}`).digest('hex');

/** The signed, expiring link of a file: `{PUBLIC_URL}/files/{id}?expires={unix}&sig={hex}`. */
export function fileRef(config: Pick<Config, 'publicUrl'>, id: string, now = Date.now()): FileRef {
  const expires = Math.floor(now / 1000) + FILE_LINK_TTL_SECONDS;
  return { id, url: `${config.publicUrl}/files/${id}?expires=${expires}&sig=${linkSignature(id, expires)}`, expiresAt: new Date(expires * 1000).toISOString() };
}

/** 403 invalid_signature unless `sig` is this file's signature for `expires` and that is not past (constant-time compare). */
export function verifyFileLink(id: string, expires: string | null, sig: string | null, now = Date.now()): void {
  const at = Number(expires);
  if (!expires || !/^\d{1,12}$/.test(expires) || !sig || !/^[0-9a-f]{64}$/.test(sig)) throw new InvalidSignature();
  const good = constantTimeEqual(sig, linkSignature(id, at));
  if (!good || at * 1000 < now) throw new InvalidSignature();
}

/** Whether the project's files keep their content (Free and a zero file-storage quota: metadata only). */
export function keepsFileContent(project: ProjectQuotaSource): boolean {
  return project.tier !== 'free' && projectQuotas(project).file_storage_bytes > 0;
}

const TOKEN = "[!#$%&'*+.^_`|~0-9a-z-]+";
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}$`);

/**
 * A file's content type as stored and served: the `type/subtype` of what the producer named
 * (lower-case, parameters dropped) when both are HTTP tokens, else `application/octet-stream`
 * (an 8-bit or odd value would break the header it is served in).
 */
export function normalContentType(value: string | null | undefined): string {
  const type = (value ?? '').split(';')[0].trim().toLowerCase();
  return type.length <= 255 && MEDIA_TYPE.test(type) ? type : 'application/octet-stream';
}

export const storageKey = (projectId: string, fileId: string) => `${projectId}/${fileId}`;

/**
 * Records the event's kept files in the caller's transaction (the one the event committed in)
 * after counting their bytes against file_storage_bytes (409 QuotaExceeded: roll back).
 */
export async function recordFiles(
  rt: Runtime,
  client: pg.PoolClient,
  owner: { project: ProjectQuotaSource & { id: string }; webhook: WebhookQuotaSource; eventId: string; expiresAt: Date | null },
  files: NewFile[],
  opts: { roomChecked?: boolean } = {},
): Promise<void> {
  if (files.length === 0) return;
  const bytes = files.reduce((n, f) => n + f.size, 0);
  // roomChecked: the caller chose what fits with fileStorageRoom in this transaction.
  if (opts.roomChecked) await countFileStorage(client, { projectId: owner.project.id, webhookId: owner.webhook.id, bytes });
  else await enforceFileStorageQuota(rt, client, { project: owner.project, webhook: owner.webhook, bytes });
  await client.query(
    `INSERT INTO files (id, project_id, webhook_id, event_id, field, filename, content_type, size, sha256, storage_key, expires_at)
     SELECT f.id, $1, $2, $3, f.field, f.filename, f.content_type, f.size, f.sha256, f.storage_key, $4
       FROM jsonb_to_recordset($5::jsonb) AS f(id text, field text, filename text, content_type text, size bigint, sha256 text, storage_key text)`,
    [
      owner.project.id,
      owner.webhook.id,
      owner.eventId,
      owner.expiresAt,
      JSON.stringify(files.map((f) => ({ id: f.id, field: f.field, filename: f.filename, content_type: f.contentType, size: f.size, sha256: f.sha256, storage_key: f.storageKey }))),
    ],
  );
}

/** Files stored with their event in the event's own statement (src/ingest/store-event.ts): their rows and when their content expires. */
export interface EventFiles {
  rows: NewFile[];
  expiresAt: Date | null;
}

/**
 * The file rows as a common table expression of the statement that stores their event: written
 * only when `storedCte` (the event insert, returning `id, project_id, webhook_id`) wrote the
 * event. Parameters: `files_rows` and `files_expires_at` (fileRowsValues).
 */
export const fileRowsCte = (p: NamedParams, storedCte: string) => `
stored_files AS (
  INSERT INTO files (id, project_id, webhook_id, event_id, field, filename, content_type, size, sha256, storage_key, expires_at)
  SELECT f.id, s.project_id, s.webhook_id, s.id, f.field, f.filename, f.content_type, f.size, f.sha256, f.storage_key, ${p.$('files_expires_at', 'timestamp')}
    FROM ${storedCte} s, jsonb_to_recordset(${p.$('files_rows', 'jsonb')}) AS f(id text, field text, filename text, content_type text, size bigint, sha256 text, storage_key text)
)`;

/** The values fileRowsCte names. */
export const fileRowsValues = (files: EventFiles) => ({
  files_rows: JSON.stringify(files.rows.map((f) => ({ id: f.id, field: f.field, filename: f.filename, content_type: f.contentType, size: f.size, sha256: f.sha256, storage_key: f.storageKey }))),
  files_expires_at: files.expiresAt,
});

/** Removes content written for files that were not recorded (the event failed, or was a duplicate). */
export async function discardContent(config: Config, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  try {
    await fileStore(config).delete(keys);
  } catch (err) {
    log.warn({ err, keys: keys.length }, 'could not remove the content of files whose event was not stored');
  }
}

interface FileRow {
  id: string;
  project_id: string;
  webhook_id: string;
  event_id: string;
  filename: string;
  content_type: string;
  size: string;
  sha256: string;
  storage_key: string;
  state: string;
  created_at: Date;
  expires_at: Date | null;
}

const metadataOf = (r: FileRow): FileMetadata => ({
  id: r.id,
  webhookId: r.webhook_id,
  eventId: r.event_id,
  filename: r.filename,
  contentType: r.content_type,
  size: Number(r.size),
  sha256: r.sha256,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

async function fileRow(rt: Runtime, id: string, projectId: string | null): Promise<FileRow> {
  if (!/^file_[0-9a-z]{26}$/.test(id)) throw new NotFound('file', id);
  const { rows } = await rt.db.pool.query<FileRow>(
    `SELECT id, project_id, webhook_id, event_id, filename, content_type, size, sha256, storage_key, state, created_at, expires_at FROM files WHERE id = $1 AND ($2::text IS NULL OR project_id = $2)`,
    [id, projectId],
  );
  if (!rows[0]) throw new NotFound('file', id);
  return rows[0];
}

/** A file's metadata (404 for another project's file). */
export async function getFileMetadata(rt: Runtime, projectId: string, id: string): Promise<FileMetadata> {
  return metadataOf(await fileRow(rt, id, projectId));
}

/** Files of one event (oldest first), for GraphQL. */
export async function eventFiles(rt: Runtime, projectId: string, eventId: string): Promise<FileMetadata[]> {
  const { rows } = await rt.db.pool.query<FileRow>(
    `SELECT id, project_id, webhook_id, event_id, filename, content_type, size, sha256, storage_key, state, created_at, expires_at FROM files WHERE event_id = $1 AND project_id = $2 ORDER BY id`,
    [eventId, projectId],
  );
  return rows.map(metadataOf);
}

/**
 * A file's content, with its metadata: 404 when unknown (or, with `projectId`, another
 * project's); 410 payload_gone once retention removed it.
 */
export async function openFile(rt: Runtime, id: string, projectId: string | null): Promise<{ file: FileMetadata; body: Readable }> {
  const row = await fileRow(rt, id, projectId);
  if (row.state !== 'stored' || (row.expires_at && row.expires_at.getTime() <= Date.now())) throw new FileGone();
  const body = await fileStore(rt.config).get(row.storage_key);
  if (!body) throw new FileGone();
  return { file: metadataOf(row), body };
}

/**
 * Retention: removes the content of files whose payload retention ended (`expires_at` passed, or,
 * with `webhook`, created before the webhook's current payload retention),
 * oldest first in batches: the store first, then the rows are marked `purged` and
 * file_storage_bytes goes down in one statement. Returns how many were purged.
 */
export async function purgeExpiredFiles(
  rt: Pick<Runtime, 'db' | 'config'>,
  opts: { batchSize: number; now: number; deadline: number; webhook?: { id: string; idBefore: string } },
): Promise<{ purged: number; complete: boolean }> {
  let purged = 0;
  for (;;) {
    // With `webhook`: that webhook's files created before its CURRENT payload retention's cut-off
    // (a tightened retention applies to files already in), by the (webhook_id, id) index.
    const { rows } = await rt.db.pool.query<{ id: string; storage_key: string }>(
      opts.webhook
        ? `SELECT id, storage_key FROM files WHERE webhook_id = $1 AND id < $2 AND state = 'stored' ORDER BY id LIMIT $3`
        : `SELECT id, storage_key FROM files WHERE expires_at <= $1 AND state = 'stored' ORDER BY expires_at LIMIT $2`,
      opts.webhook ? [opts.webhook.id, opts.webhook.idBefore, opts.batchSize] : [new Date(opts.now), opts.batchSize],
    );
    if (rows.length === 0) return { purged, complete: true };
    await fileStore(rt.config).delete(rows.map((r) => r.storage_key));
    await inTransaction(rt.db.pool, async (client) => {
      const { rows: done } = await client.query<{ project_id: string; webhook_id: string; bytes: string }>(
      `WITH gone AS (
         UPDATE files SET state = 'purged', purged_at = now() WHERE id = ANY($1) AND state = 'stored' RETURNING project_id, webhook_id, size
       )
       SELECT project_id, webhook_id, sum(size)::bigint AS bytes FROM gone GROUP BY 1, 2`,
      [rows.map((r) => r.id)],
    );
      for (const d of done) await releaseFileStorage(client, { projectId: d.project_id, webhookId: d.webhook_id, bytes: Number(d.bytes) });
    });
    purged += rows.length;
    if (rows.length < opts.batchSize) return { purged, complete: true };
    if (Date.now() > opts.deadline) return { purged, complete: false };
  }
}
