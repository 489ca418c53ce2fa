import { createHash } from 'node:crypto';
import { mkdir, open, readdir, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Config } from '../config.ts';

/**
 * Where file content lives (CONTRACT §7): an S3-compatible bucket when FILES_S3_BUCKET is set,
 * else local disk under DATA_DIR/files (one machine only). Keys are `{projectId}/{fileId}`.
 * Content is written while it streams in and is complete only once `put` resolves (disk: a
 * temporary name renamed at the end; S3: a multipart upload completed at the end), so a reader
 * never sees half a file.
 */
export interface FileStore {
  readonly kind: 'disk' | 's3';
  /** Writes the stream's bytes (or the bytes, when they are in memory already) under `key`; rejects (and leaves nothing) when the stream errors. */
  put(key: string, body: Readable | Buffer, contentType: string): Promise<void>;
  /** The content, or null when there is none under `key`. */
  get(key: string): Promise<Readable | null>;
  /** Removes the keys (missing ones are fine). */
  delete(keys: string[]): Promise<void>;
  /** Every key whose content was last written before `before`, in pages of at most `pageSize` (the orphan sweep: files/orphans.ts). */
  listWrittenBefore(before: Date, pageSize: number): AsyncIterable<string[]>;
  close(): void;
}

/** Files up to this size are gathered while they stream and written in one call; larger ones are written chunk by chunk. */
const DISK_SMALL_FILE = 1024 * 1024;

/** A storage key: `{projectId}/{fileId}` (storageKey in service.ts). */
const KEY = /^[A-Za-z0-9_]+\/[A-Za-z0-9_]+$/;

class DiskStore implements FileStore {
  readonly kind = 'disk';
  private readonly dirs = new Set<string>();
  constructor(private readonly dir: string) {}
  private file(key: string) {
    if (!KEY.test(key)) throw new Error(`bad file key ${key}`);
    return path.join(this.dir, key);
  }
  /**
   * Written under its final name: nothing names a file before its row commits, which happens only
   * after put resolved, so no reader can see it half-written. A failed write removes what it wrote.
   */
  async put(key: string, body: Readable | Buffer): Promise<void> {
    const target = this.file(key);
    const dir = path.dirname(target);
    if (!this.dirs.has(dir)) {
      await mkdir(dir, { recursive: true });
      if (this.dirs.size > 10_000) this.dirs.clear();
      this.dirs.add(dir);
    }
    let handle: FileHandle | null = null;
    try {
      if (Buffer.isBuffer(body)) {
        await writeFile(target, body);
        return;
      }
      const pending: Buffer[] = [];
      let size = 0;
      for await (const chunk of body) {
        const c = chunk as Buffer;
        if (handle) {
          await handle.write(c);
          continue;
        }
        pending.push(c);
        size += c.length;
        if (size > DISK_SMALL_FILE) {
          handle = await open(target, 'w');
          await handle.writev(pending);
          pending.length = 0;
        }
      }
      if (handle) await handle.close();
      else await writeFile(target, pending.length === 1 ? pending[0] : Buffer.concat(pending, size));
      handle = null;
    } catch (err) {
      await handle?.close().catch(() => {});
      await rm(target, { force: true });
      throw err;
    }
  }
  async get(key: string): Promise<Readable | null> {
    // Opened before the stream is made: content removed meanwhile (retention, the orphan sweep)
    // is null here, never an error event on a stream its reader may not listen to yet.
    let handle: FileHandle;
    try {
      handle = await open(this.file(key), 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return handle.createReadStream();
  }
  async delete(keys: string[]): Promise<void> {
    await Promise.all(keys.map((k) => rm(this.file(k), { force: true })));
  }
  async *listWrittenBefore(before: Date, pageSize: number): AsyncIterable<string[]> {
    const names = async (dir: string) => (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((e) => /^[A-Za-z0-9_]+$/.test(e.name));
    const page: string[] = [];
    for (const project of await names(this.dir)) {
      if (!project.isDirectory()) continue;
      const entries = (await names(path.join(this.dir, project.name))).filter((e) => e.isFile());
      // Stat a bounded number at once: a project may hold many files.
      for (let i = 0; i < entries.length; i += 100) {
        const stats = await Promise.all(entries.slice(i, i + 100).map((e) => stat(path.join(this.dir, project.name, e.name)).catch(() => null)));
        stats.forEach((st, j) => {
          if (st && st.mtimeMs < before.getTime()) page.push(`${project.name}/${entries[i + j].name}`);
        });
        if (page.length >= pageSize) {
          yield page.splice(0, pageSize);
        }
      }
    }
    while (page.length) yield page.splice(0, pageSize);
  }
  close() {}
}

class S3Store implements FileStore {
  readonly kind = 's3';
  private readonly client: S3Client;
  constructor(
    private readonly bucket: string,
    private readonly prefix: string,
    config: Config,
  ) {
    this.client = new S3Client({
      region: config.FILES_S3_REGION,
      endpoint: config.FILES_S3_ENDPOINT,
      forcePathStyle: config.FILES_S3_FORCE_PATH_STYLE,
      credentials:
        config.FILES_S3_ACCESS_KEY_ID && config.FILES_S3_SECRET_ACCESS_KEY
          ? { accessKeyId: config.FILES_S3_ACCESS_KEY_ID, secretAccessKey: config.FILES_S3_SECRET_ACCESS_KEY }
          : undefined,
      // Streamed bodies: no checksum trailer (some S3-compatible servers store the chunk framing).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }
  async put(key: string, body: Readable | Buffer, contentType: string): Promise<void> {
    if (Buffer.isBuffer(body)) {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.prefix + key, Body: body, ContentType: contentType }));
      return;
    }
    // The upload reads the stream in 5 MB parts; a failed one is aborted (no part left behind).
    const upload = new Upload({ client: this.client, params: { Bucket: this.bucket, Key: this.prefix + key, Body: body, ContentType: contentType }, queueSize: 2, leavePartsOnError: false });
    const failed = new Promise<never>((_, reject) => body.once('error', reject));
    try {
      await Promise.race([upload.done(), failed]);
    } catch (err) {
      await upload.abort().catch(() => {});
      await this.delete([key]).catch(() => {});
      throw err;
    }
  }
  async get(key: string): Promise<Readable | null> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }));
      return out.Body as Readable;
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  }
  async *listWrittenBefore(before: Date, pageSize: number): AsyncIterable<string[]> {
    let token: string | undefined;
    do {
      const out = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix, ContinuationToken: token, MaxKeys: Math.min(1000, pageSize) }));
      const keys = (out.Contents ?? [])
        .filter((o) => o.Key && o.LastModified && o.LastModified.getTime() < before.getTime())
        .map((o) => o.Key!.slice(this.prefix.length))
        .filter((k) => KEY.test(k));
      if (keys.length) yield keys;
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }
  async delete(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((k) => ({ Key: this.prefix + k })), Quiet: true } }));
    }
  }
  close() {
    this.client.destroy();
  }
}

const stores = new WeakMap<Config, FileStore>();

/** The file store this process's settings name (one per configuration). */
export function fileStore(config: Config): FileStore {
  let store = stores.get(config);
  if (!store) {
    store = config.FILES_S3_BUCKET ? new S3Store(config.FILES_S3_BUCKET, config.FILES_S3_PREFIX, config) : new DiskStore(path.join(config.dataDir, 'files'));
    stores.set(config, store);
  }
  return store;
}

/** Thrown into a file's stream when it passes its cap. */
export class FileTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`file over ${limit} bytes`);
  }
}

/** What measuring a stream found: its size and sha256 (hex). */
export interface Measured {
  size: number;
  sha256: string;
}

/**
 * Hashes (sha256) and counts a file's bytes as they pass; fails with FileTooLarge as soon as
 * more than `limit` bytes have passed, or with what `charge` returns (the caller's cap over
 * several files), before more is read. `measured` is complete once the stream ended.
 */
export function measuring(limit: number, charge: (bytes: number) => Error | null = () => null): { transform: Transform; measured: () => Measured } {
  const hash = createHash('sha256');
  let size = 0;
  let digest = '';
  const transform = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > limit) return done(new FileTooLarge(limit));
      const refused = charge(chunk.length);
      if (refused) return done(refused);
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      digest = hash.digest('hex');
      done();
    },
  });
  return { transform, measured: () => ({ size, sha256: digest }) };
}

/** Consumes a stream without keeping it (content not kept: only measured). */
export function discard(): PassThrough {
  const sink = new PassThrough();
  sink.resume();
  return sink;
}

/** Releases the store of this configuration (the S3 client's sockets); a later call makes a new one. */
export function closeFileStore(config: Config): void {
  stores.get(config)?.close();
  stores.delete(config);
}
