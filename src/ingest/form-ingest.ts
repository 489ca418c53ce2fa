import type { IncomingMessage, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { InvalidRequest, MethodNotAllowed, NotFound, OriginNotAllowed, PayloadTooLarge, UnsupportedMediaType } from '../errors.ts';
import { discardContent, fileRef, normalContentType, keepsFileContent, storageKey, type NewFile } from '../files/service.ts';
import { FileTooLarge, fileStore, measuring, type Measured } from '../files/store.ts';
import { mediaType } from '../wire/body.ts';
import { closeAfterAnswer, sendError, sendJson } from '../wire/respond.ts';
import { FORM_INGEST_PATH } from '../wire/ingest-paths.ts';
import { newId } from '../ids.ts';
import { webhookQuotas } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { acceptEvent, type AcceptedEvent, type Admission } from './accept-event.ts';
import { hasStandardSignature } from './authenticate-producer.ts';
import { PUBLIC_ID, type IngestTarget } from './find-ingest-target.ts';
import { admitProducer, eventHeaders, eventQuery, FILE_LIMITS, INGEST_BODY_LIMIT } from './admission.ts';
import { ingestTargets } from './ingest-target-cache.ts';
import type { IngestChannel } from './inbound-event.ts';
import { IDEMPOTENCY_KEY_FIELD } from './idempotency-key.ts';
import { sha256Hex } from '../encryption.ts';
import { FORM_PREFLIGHT_HEADERS, formCorsHeaders, originAllowed } from '../webhook-config/form-origins.ts';

/** Form ingest's caps (CONTRACT §7 and docs/forms-and-email.md): all refused with 413 while streaming. */
export const FORM_LIMITS = {
  /** One file. */
  fileBytes: FILE_LIMITS.fileBytes,
  /** The files of one post together. */
  postFileBytes: FILE_LIMITS.eventFileBytes,
  /** Fields (controls included) per post. */
  fields: 1_000,
  /** Files per post. */
  files: 100,
  /** One field's name, in bytes. */
  fieldNameBytes: 256,
  /** One field's value, in bytes. */
  fieldValueBytes: 1024 * 1024,
  /** All field values together (the delivered envelope is an ingest body: at most 10 MB). */
  fieldBytes: 8 * 1024 * 1024,
} as const;

/** The whole request (fields, files and multipart framing), counted as it is read: 413 above. */
export const FORM_REQUEST_BYTES = FORM_LIMITS.postFileBytes + FORM_LIMITS.fieldBytes + 1024 * 1024;

const PREFIX = `${FORM_INGEST_PATH}/`;
const FORM_TYPES = new Set(['multipart/form-data', 'application/x-www-form-urlencoded']);

interface ParsedFile {
  id: string;
  field: string;
  filename: string;
  contentType: string;
  /** Where its content was written; null when it was only measured. */
  key: string | null;
  measured: () => Measured;
}

interface ParsedForm {
  /** Own keys only (no prototype): `constructor` or `__proto__` is a field like any other. */
  fields: Record<string, string | string[]>;
  secret?: string;
  redirect?: string;
  honeypot?: string;
  /** The `_idempotency_key` control (CONTRACT §12). */
  idempotencyKey?: string;
  /** Every field but the controls, in the order received: what "the same body" compares. */
  ordered: [string, string][];
  files: ParsedFile[];
  /** The request's bytes, kept only when it carries a Standard Webhooks signature. */
  raw: Buffer;
}

/** Control characters (NUL included) cannot be stored as text; a filename is at most 255 characters. */
function cleanName(name: string | undefined): string {
  return (name ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 255) || 'file';
}

const tooLarge = (what: string, limit: number) => Object.assign(new PayloadTooLarge(limit), { message: `${what} exceeds the limit of ${limit} bytes.` });

/**
 * Parses the post while it streams (busboy): fields into `fields` (a repeated name becomes an
 * array, in order), `_`-prefixed controls aside, each file hashed and counted, its content written
 * to the store when `keep`. The first cap passed fails the parse at once; `written` lists every
 * key whose content was (being) written, for the caller to remove when the event is not stored.
 */
function parseForm(req: IncomingMessage, keep: { store: ReturnType<typeof fileStore>; projectId: string } | null, written: string[]): Promise<ParsedForm> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        defParamCharset: 'utf8',
        limits: { fieldNameSize: FORM_LIMITS.fieldNameBytes + 1, fieldSize: FORM_LIMITS.fieldValueBytes, fields: FORM_LIMITS.fields, files: FORM_LIMITS.files, parts: FORM_LIMITS.fields + FORM_LIMITS.files },
      });
    } catch (err) {
      reject(new InvalidRequest(`The form body cannot be read: ${(err as Error).message}.`));
      return;
    }
    const form: ParsedForm = { fields: Object.create(null) as Record<string, string | string[]>, ordered: [], files: [], raw: Buffer.alloc(0) };
    const raw: Buffer[] = [];
    const keepRaw = hasStandardSignature(req.headers);
    let readBytes = 0;
    // Every byte read is counted (chunked posts have no content-length); a signed post's bytes
    // are kept for the signature, up to the same cap.
    const onData = (c: Buffer) => {
      readBytes += c.length;
      if (readBytes > FORM_REQUEST_BYTES) return fail(tooLarge('The post', FORM_REQUEST_BYTES));
      if (keepRaw) raw.push(c);
    };
    req.on('data', onData);
    const uploads: Promise<unknown>[] = [];
    const active = new Set<NodeJS.ReadableStream & { destroy(err?: Error): void }>();
    let fieldBytes = 0;
    let fileBytes = 0;
    let failed = false;
    let finished = false;
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      req.off('data', onData);
      req.unpipe(bb);
      raw.length = 0;
      // Nothing more is read: the caller answers with `connection: close` and then drops the connection.
      req.pause();
      for (const s of active) s.destroy(err);
      void Promise.allSettled(uploads).then(() => reject(err));
    };
    bb.on('field', (name, value, info) => {
      if (failed) return;
      if (info.nameTruncated || Buffer.byteLength(name) > FORM_LIMITS.fieldNameBytes) return fail(tooLarge('A field name', FORM_LIMITS.fieldNameBytes));
      if (info.valueTruncated) return fail(tooLarge(`The field ${name.slice(0, 64)}`, FORM_LIMITS.fieldValueBytes));
      fieldBytes += Buffer.byteLength(value) + Buffer.byteLength(name);
      if (fieldBytes > FORM_LIMITS.fieldBytes) return fail(tooLarge('The fields together', FORM_LIMITS.fieldBytes));
      if (name.startsWith('_')) {
        if (name === '_secret') form.secret = value;
        else if (name === '_redirect') form.redirect = value;
        else if (name === '_honeypot') form.honeypot = value;
        else if (name === IDEMPOTENCY_KEY_FIELD) form.idempotencyKey = value;
        return;
      }
      form.ordered.push([name, value]);
      const prev = form.fields[name];
      form.fields[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
    });
    bb.on('file', (name, stream, info) => {
      if (failed || name.startsWith('_')) {
        stream.resume();
        return;
      }
      const id = newId('file');
      const contentType = normalContentType(info.mimeType);
      const { transform, measured } = measuring(FORM_LIMITS.fileBytes, (n) => ((fileBytes += n) > FORM_LIMITS.postFileBytes ? new FileTooLarge(FORM_LIMITS.postFileBytes) : null));
      const key = keep ? storageKey(keep.projectId, id) : null;
      form.files.push({ id, field: name, filename: cleanName(info.filename), contentType, key, measured });
      active.add(stream);
      let upload: Promise<unknown>;
      if (keep && key) {
        written.push(key);
        upload = Promise.all([pipeline(stream, transform), keep.store.put(key, transform, contentType)]);
      } else {
        upload = pipeline(stream, transform, new Writable({ write: (_c, _e, cb) => cb() }));
      }
      upload = upload.then(
        () => active.delete(stream),
        (err: unknown) => {
          active.delete(stream);
          const e = err as Error;
          fail(e instanceof FileTooLarge ? tooLarge(e.limit === FORM_LIMITS.fileBytes ? 'A file' : 'The files of this post together', e.limit) : failed ? e : new InvalidRequest(`The form body is malformed: ${e.message}.`));
        },
      );
      uploads.push(upload);
    });
    bb.on('fieldsLimit', () => fail(tooLarge(`More than ${FORM_LIMITS.fields} fields:`, FORM_LIMITS.fields)));
    bb.on('filesLimit', () => fail(tooLarge(`More than ${FORM_LIMITS.files} files:`, FORM_LIMITS.files)));
    bb.on('partsLimit', () => fail(tooLarge('The number of parts', FORM_LIMITS.fields + FORM_LIMITS.files)));
    bb.on('error', (err: Error) => fail(new InvalidRequest(`The form body is malformed: ${err.message}.`)));
    bb.on('close', () => {
      finished = true;
      void Promise.allSettled(uploads).then(() => {
        if (failed) return;
        form.raw = Buffer.concat(raw);
        resolve(form);
      });
    });
    // A client that goes away mid-post (a file that never ends): nothing is kept.
    req.on('close', () => {
      if (!finished && !req.complete) fail(new InvalidRequest('The connection closed before the form body ended.'));
    });
    req.pipe(bb);
  });
}

/**
 * `_redirect` must be an absolute http(s) URL (never `javascript:` or the like), without control
 * characters or spaces (which `new URL()` would silently drop). Returns the normalized URL
 * (`url.href`: ASCII, percent-encoded), the only value ever sent as `location`; null when none.
 */
export function checkRedirect(redirect: string | undefined): string | null {
  if (redirect === undefined || redirect === '') return null;
  let url: URL | null = null;
  try {
    url = /[\u0000-\u0020\u007f-\u009f]/.test(redirect) ? null : new URL(redirect);
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || redirect.length > 2048 || url.href.length > 4096) {
    throw new InvalidRequest('_redirect must be an absolute http or https URL.', '_redirect');
  }
  return url.href;
}

/**
 * "The same body" of a form post (CONTRACT §12): its fields in order (controls left out) and each
 * file's field name, filename, content type and sha256, so a browser's new multipart boundary on a
 * retry changes nothing.
 */
function formFingerprint(form: ParsedForm): string {
  const files = form.files.map((f) => [f.field, f.filename, f.contentType, f.measured().sha256]);
  return sha256Hex(JSON.stringify([form.ordered, files]));
}

/** `OPTIONS /f/{publicId}`: the CORS preflight (CONTRACT §12); 404 for an unknown webhook. */
async function preflight(rt: Runtime, req: IncomingMessage, res: ServerResponse, publicId: string) {
  if (!PUBLIC_ID.test(publicId)) throw new NotFound('webhook');
  const known = await ingestTargets(rt).decide(rt, publicId, (target) => {
    if (!target || target.status === 'archived') throw new NotFound('webhook');
    return target;
  });
  const cors = formCorsHeaders(known.formAllowedOrigins, req.headers.origin);
  // An origin not listed gets no CORS headers at all: the browser then refuses the post.
  res.writeHead(204, 'access-control-allow-origin' in cors ? { ...cors, ...FORM_PREFLIGHT_HEADERS } : cors);
  res.end();
}

/**
 * Replaces the answer's CORS headers by those `list` gives `origin`: the answer carries those of
 * the lookup its post was decided on (CONTRACT §12), which may be fresher than the first one.
 */
function resetFormCors(res: ServerResponse, list: readonly string[], origin: string | undefined) {
  res.removeHeader('access-control-allow-origin');
  res.removeHeader('vary');
  for (const [name, value] of Object.entries(formCorsHeaders(list, origin))) res.setHeader(name, value);
}

function answer(res: ServerResponse, location: string | null, accepted: AcceptedEvent) {
  if (location) {
    res.writeHead(303, { location, 'content-length': '0' });
    res.end();
  } else sendJson(res, 202, accepted);
}

/**
 * `/f/{publicId}`: form ingest (CONTRACT §7). A thin channel: the post (urlencoded or multipart)
 * becomes the `form.submitted` envelope, the body of an InboundEvent that acceptEvent admits,
 * routes and stores like any other. Files are hashed while they stream and, where the project
 * keeps file content, written to the file store before the event commits; their rows and
 * file_storage_bytes are written in the event's transaction. Content of a post that is not
 * stored (refused, failed, honeypot, duplicate) is removed again.
 */
export function createFormIngestHandler(rt: Runtime) {
  return async function handleFormIngest(req: IncomingMessage, res: ServerResponse, url: URL) {
    const written: string[] = [];
    let recorded = false;
    try {
      const publicId = url.pathname.slice(PREFIX.length);
      if (req.method === 'OPTIONS') return await preflight(rt, req, res, publicId);
      if (req.method !== 'POST') throw new MethodNotAllowed(['POST', 'OPTIONS']);
      if (!PUBLIC_ID.test(publicId)) throw new NotFound('webhook');
      // The webhook as this process knows it: an unknown one is refused before the upload is read,
      // and a project that keeps no file content (Free) has its files measured, never written.
      // (Unknown or archived on a kept lookup is decided again on a fresh one.)
      const known = await ingestTargets(rt).decide(rt, publicId, (target) => {
        if (!target || target.status === 'archived') throw new NotFound('webhook');
        return target;
      });
      // Every answer from here on, errors included, carries the webhook's CORS headers (CONTRACT §12):
      // this lookup's, until the post is decided on another (see resetFormCors).
      for (const [name, value] of Object.entries(formCorsHeaders(known.formAllowedOrigins, req.headers.origin))) res.setHeader(name, value);
      const type = mediaType(req.headers['content-type']);
      if (!FORM_TYPES.has(type)) throw new UnsupportedMediaType('Form ingest takes multipart/form-data or application/x-www-form-urlencoded.');
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > FORM_REQUEST_BYTES) throw new PayloadTooLarge(FORM_REQUEST_BYTES);
      const keep = keepsFileContent(known.project) ? { store: fileStore(rt.config), projectId: known.projectId } : null;

      const receivedAt = new Date();
      const form = await parseForm(req, keep, written);
      if (form.honeypot) {
        // A page on an origin the webhook does not allow is refused as any post is (403), decided on a fresh lookup.
        if (!originAllowed(known.formAllowedOrigins, req.headers.origin)) {
          const fresh = await ingestTargets(rt).fresh(rt, publicId);
          if (fresh) resetFormCors(res, fresh.formAllowedOrigins, req.headers.origin);
          if (!fresh || !originAllowed(fresh.formAllowedOrigins, req.headers.origin)) throw new OriginNotAllowed();
        }
        // A bot: answered as an accepted post, nothing stored or delivered (a bad _redirect is still 400).
        return answer(res, checkRedirect(form.redirect), { eventId: newId('evt'), deliveryId: newId('del'), status: 'queued' });
      }
      let location: string | null = null;
      const headers = eventHeaders(req.headers);
      const query = eventQuery(url.searchParams);
      let keptNow = false;
      const build = (target: IngestTarget) => {
        keptNow = keep !== null && target.projectId === keep.projectId && keepsFileContent(target.project);
        const now = receivedAt.getTime();
        const envelope = {
          type: 'form.submitted',
          webhookId: target.webhookId,
          receivedAt: receivedAt.toISOString(),
          fields: form.fields,
          files: form.files.map((f) => {
            const m = f.measured();
            return { field: f.field, filename: f.filename, contentType: f.contentType, size: m.size, sha256: m.sha256, ...(keptNow && f.key ? { fileRef: fileRef(rt.config, f.id, now) } : {}) };
          }),
        };
        const body = Buffer.from(JSON.stringify(envelope));
        if (body.length > INGEST_BODY_LIMIT) throw new PayloadTooLarge(INGEST_BODY_LIMIT);
        // The written files' rows and file_storage_bytes go in the event's own statement (409 when they do not fit).
        const rows: NewFile[] = keptNow
          ? form.files.filter((f) => f.key).map((f) => ({ id: f.id, field: f.field, filename: f.filename, contentType: f.contentType, ...f.measured(), storageKey: f.key! }))
          : [];
        const files = rows.length ? { rows, expiresAt: new Date(now + webhookQuotas(target.project, target).payload_retention_seconds * 1000) } : undefined;
        return { channel: 'form' as const, method: 'POST', path: '/', query, headers, contentType: 'application/json', body, files };
      };
      const admitPost = admitProducer(req, form.raw, `${rt.config.publicUrl}${url.pathname}${url.search}`, {
        fieldSecret: form.secret,
        validate: () => void (location = checkRedirect(form.redirect)),
        form: { idempotencyKey: form.idempotencyKey, fingerprint: () => formFingerprint(form) },
      });
      // acceptEvent decides again on a fresh lookup what a kept one refused (or the ingest statement
      // found out of date): the answer, accepted or refused, carries the CORS headers of the lookup
      // last admitted on. Nothing to do while that is still `known` (the happy path).
      let corsFrom = known;
      const admit: Admission = (target) => {
        if (target !== corsFrom) resetFormCors(res, (corsFrom = target).formAllowedOrigins, req.headers.origin);
        return admitPost(target);
      };
      // One statement stores the event, its delivery and the files' rows, and wakes the runners after it commits.
      const accepted = await acceptEvent(rt, publicId, { channel: 'form', build }, admit, undefined, { origin: req.socket });
      recorded = keptNow && accepted.status !== 'duplicate';
      answer(res, location, accepted);
    } catch (err) {
      if (!req.readableEnded) {
        // The rest of the upload is neither read nor buffered: the answer goes out, then the connection is dropped.
        closeAfterAnswer(req, res);
      }
      sendError(res, err);
    } finally {
      if (!recorded) await discardContent(rt.config, written);
    }
  };
}

/** Form ingest, mounted at `/f` (FORM_INGEST_PATH). */
export const formChannel: IngestChannel = { name: 'form', route: { prefix: FORM_INGEST_PATH, create: createFormIngestHandler } };
