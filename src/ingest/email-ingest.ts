import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { PoolClient } from 'pg';
import { simpleParser, type AddressObject, type Attachment, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerAddress, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { inTransaction } from '../db/client.ts';
import { DomainError, isDatabaseUnavailable, NotFound, PayloadTooLarge, QuotaExceeded, SenderNotAllowed, WebhookPaused } from '../errors.ts';
import { senderAllowed } from '../webhook-config/email-senders.ts';
import { discardContent, fileRef, normalContentType, keepsFileContent, recordFiles, storageKey, type NewFile } from '../files/service.ts';
import { fileStore } from '../files/store.ts';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { fileStorageAmple, fileStorageRoom } from '../projects/quotas/file-storage.ts';
import { ingestRefusalHint } from '../projects/quotas/ingest-hint.ts';
import { webhookQuotas } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { acceptEvent, countIngest, type AcceptedEvent, type Admission } from './accept-event.ts';
import { PUBLIC_ID, type IngestTarget } from './find-ingest-target.ts';
import type { IngestChannel } from './inbound-event.ts';
import { FILE_LIMITS, INGEST_BODY_LIMIT } from './admission.ts';
import { ingestTargets } from './ingest-target-cache.ts';

/** Email ingest's caps (CONTRACT §7 and docs/forms-and-email.md). */
export const EMAIL_LIMITS = {
  /** A message (552 above; advertised with SIZE). */
  messageBytes: 60 * 1024 * 1024,
  /** SMTP connections at once (smtp-server's maxClients; more are refused with 421). */
  clients: 100,
  /** Recipients per message (452 for more). */
  recipients: 50,
  /** Attachments whose content is kept, per message; the rest are metadata only. */
  keptAttachments: 100,
  /** MIME parts a message may have (an attachment bomb beyond it is refused with 554). */
  mimeParts: 10_000,
  /** Attachments listed in the envelope (an attachment bomb lists the first ones only). */
  listedAttachments: 1_000,
  /** One kept attachment, and the kept attachments together (as form files). */
  fileBytes: FILE_LIMITS.fileBytes,
  messageFileBytes: FILE_LIMITS.eventFileBytes,
} as const;

/** An SMTP reply with its code (smtp-server answers an Error's `responseCode`). */
function reply(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

/** Why a webhook would not take a message, as the SMTP reply RCPT or DATA gives. */
export function smtpRefusal(err: unknown): Error & { responseCode?: number } {
  if (err instanceof NotFound) return reply(550, '5.1.1 No such mailbox');
  if (err instanceof WebhookPaused) return reply(450, '4.2.1 Mailbox paused; try again later');
  if (err instanceof QuotaExceeded) {
    const storage = err.details.quota === 'stored_payload_bytes' || err.details.quota === 'file_storage_bytes';
    return storage ? reply(452, `4.3.1 Insufficient storage (${String(err.details.quota)})`) : reply(451, `4.7.0 Quota exceeded (${String(err.details.quota)}); try again later`);
  }
  if (isDatabaseUnavailable(err)) return reply(451, '4.3.0 Temporarily unavailable; try again later');
  // Only the message itself being wrong is permanent; any other refusal (the webhook changed
  // during the request: InvalidState, a conflict) is temporary, for the sender to retry.
  if (err instanceof PayloadTooLarge) return reply(552, `5.3.4 ${err.message}`);
  if (err instanceof DomainError && err.status === 400) return reply(554, `5.6.0 ${err.message}`);
  if (err instanceof DomainError && err.status < 500) return reply(451, `4.3.0 ${err.message}; try again later`);
  log.error({ err }, 'email ingest failed');
  return reply(451, '4.3.0 Local error; try again later');
}

/** The recipient's publicId when it is `{publicId}@{EMAIL_DOMAIN}` (local part case-insensitive), else null. */
function recipientPublicId(address: string, domain: string): string | null {
  const at = address.lastIndexOf('@');
  if (at <= 0) return null;
  if (address.slice(at + 1).toLowerCase() !== domain.toLowerCase()) return null;
  const local = address.slice(0, at).toLowerCase();
  return PUBLIC_ID.test(local) ? local : null;
}

const addresses = (a: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value).map((v) => ({ address: v.address ?? '', name: v.name ?? '' }));

/** Header values by lower-case name, unfolded; a repeated header becomes an array, in order. */
function headerMap(mail: ParsedMail): Record<string, string | string[]> {
  // No prototype: a header named `constructor` or `__proto__` is kept like any other.
  const out = Object.create(null) as Record<string, string | string[]>;
  for (const { key, line } of mail.headerLines) {
    const colon = line.indexOf(':');
    const value = (colon === -1 ? '' : line.slice(colon + 1)).replace(/\r?\n[ \t]+/g, ' ').trim();
    const prev = out[key];
    out[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

const clean = (s: string | undefined, fallback: string) => (s ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 255) || fallback;

interface MeasuredAttachment {
  id: string;
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  contentId: string | null;
  disposition: string;
  content: Buffer;
}

function measure(a: Attachment): MeasuredAttachment {
  return {
    id: newId('file'),
    filename: clean(a.filename, 'attachment'),
    contentType: normalContentType(a.contentType),
    size: a.content.length,
    // mailparser hashed the content as it decoded it (checksumAlgo: sha256).
    sha256: a.checksum,
    contentId: a.contentId ?? null,
    disposition: a.contentDisposition || 'attachment',
    content: a.content,
  };
}

/**
 * Mail is the service's own channel: knowing the address is the credential. The webhook's sender
 * allowlist (CONTRACT §12: a sender it does not match is dropped), state and the default delay apply.
 */
const admitEmail =
  (sender: string): Admission =>
  (target) => {
    if (!senderAllowed(target.emailAllowlist, sender)) throw new SenderNotAllowed();
    if (target.status === 'paused') throw new WebhookPaused();
    return target.defaultDelaySeconds ? new Date(Date.now() + target.defaultDelaySeconds * 1000) : null;
  };

/** The sender an allowlist matches: the message's From: address, else the envelope's MAIL FROM. */
function senderOf(mail: Mail): string {
  return addresses(mail.parsed.from)[0]?.address || mail.mailFrom;
}

/**
 * The webhooks of `byHook` whose allowlist takes the sender (decided again on a fresh lookup when
 * the kept one refuses), and how many do not (the message is dropped for those).
 */
async function allowedHooks(rt: Runtime, byHook: Map<string, string[]>, sender: string): Promise<{ allowed: Map<string, string[]>; dropped: number }> {
  const allowed = new Map<string, string[]>();
  let dropped = 0;
  for (const [publicId, rcpt] of byHook) {
    try {
      await ingestTargets(rt).decide(rt, publicId, (target) => {
        if (target && !senderAllowed(target.emailAllowlist, sender)) throw new SenderNotAllowed();
      });
      allowed.set(publicId, rcpt);
    } catch (err) {
      if (!(err instanceof SenderNotAllowed)) throw err;
      dropped++;
    }
  }
  return { allowed, dropped };
}

/**
 * Counts a message's outcome once it is final (`250`): each webhook's event accepted (or
 * `duplicate`), and each webhook that dropped it a refusal, `sender_not_allowed` (CONTRACT §12).
 * A message refused as a whole counts only that refusal (the sender tries again, and the retry is
 * counted then).
 */
function countMessage(accepted: AcceptedEvent[], dropped: number): void {
  for (const a of accepted) countIngest('email', a);
  for (let i = 0; i < dropped; i++) countIngest('email', { refused: new SenderNotAllowed() });
}

interface Mail {
  mailFrom: string;
  /** The message as received (DATA): the events' retained source. */
  raw: Buffer;
  parsed: ParsedMail;
  attachments: MeasuredAttachment[];
  receivedAt: Date;
}

/** One webhook's share of a message: its lookup, its own file ids, and the attachments whose content was written. */
interface MailForHook {
  publicId: string;
  rcptTo: string[];
  known: IngestTarget;
  /** The message's attachments with file ids of this webhook's (two webhooks never share a file). */
  attachments: MeasuredAttachment[];
  /** Within the per-file and per-message caps, in order: written to the store, kept if they fit the quota. */
  candidates: MeasuredAttachment[];
}

/**
 * Before the transaction: the webhook's lookup (404 unknown or archived) and, where the project
 * keeps file content, the attachments within the caps written to the store (`written` lists
 * their keys, for the caller to remove what is not recorded).
 */
async function prepareMail(rt: Runtime, publicId: string, rcptTo: string[], mail: Mail, written: string[]): Promise<MailForHook> {
  // Unknown or archived on a kept lookup is decided again on a fresh one.
  const known = await ingestTargets(rt).decide(rt, publicId, (target) => {
    if (!target || target.status === 'archived') throw new NotFound('webhook');
    return target;
  });
  const attachments = mail.attachments.map((a) => ({ ...a, id: newId('file') }));
  const candidates: MeasuredAttachment[] = [];
  if (keepsFileContent(known.project)) {
    let total = 0;
    for (const a of attachments.slice(0, EMAIL_LIMITS.keptAttachments)) {
      if (a.size > EMAIL_LIMITS.fileBytes || total + a.size > EMAIL_LIMITS.messageFileBytes) continue;
      total += a.size;
      candidates.push(a);
    }
  }
  const store = fileStore(rt.config);
  await Promise.all(
    candidates.map(async (a) => {
      const key = storageKey(known.projectId, a.id);
      written.push(key);
      await store.put(key, a.content, a.contentType);
    }),
  );
  return { publicId, rcptTo, known, attachments, candidates };
}

/**
 * The `email.received` event of one message for one webhook, built once the webhook is known:
 * the envelope is the event's body (what is delivered, replayed and exported), the raw message
 * its retained source. Attachments in `kept` show a fileRef where the project keeps file
 * content; with `withFiles`, their rows go in the event's own statement (checked against
 * file_storage_bytes there). `keptNow` says whether the last build kept them.
 */
function mailEvent(rt: Runtime, hook: MailForHook, mail: Mail, kept: Set<string>, withFiles: boolean) {
  const { known, candidates, rcptTo } = hook;
  const built = { keptNow: false, target: null as IngestTarget | null };
  const { parsed } = mail;
  const build = (target: IngestTarget) => {
    built.target = target;
    const keptNow = (built.keptNow = keepsFileContent(target.project) && target.projectId === known.projectId);
    const now = mail.receivedAt.getTime();
    const envelope = {
      type: 'email.received',
      webhookId: target.webhookId,
      receivedAt: mail.receivedAt.toISOString(),
      envelope: { mailFrom: mail.mailFrom, rcptTo },
      messageId: parsed.messageId ?? null,
      subject: parsed.subject ?? '',
      date: parsed.date && !Number.isNaN(parsed.date.getTime()) ? parsed.date.toISOString() : null,
      from: addresses(parsed.from)[0] ?? null,
      to: addresses(parsed.to),
      cc: addresses(parsed.cc),
      replyTo: addresses(parsed.replyTo),
      headers: headerMap(parsed),
      text: parsed.text ?? '',
      html: typeof parsed.html === 'string' ? parsed.html : null,
      attachments: hook.attachments.slice(0, EMAIL_LIMITS.listedAttachments).map((a) => ({
        filename: a.filename,
        contentType: a.contentType,
        size: a.size,
        sha256: a.sha256,
        contentId: a.contentId,
        disposition: a.disposition,
        ...(keptNow && kept.has(a.id) ? { fileRef: fileRef(rt.config, a.id, now) } : {}),
      })),
    };
    let body = Buffer.from(JSON.stringify(envelope));
    if (body.length > INGEST_BODY_LIMIT) {
      // A huge text or html part: the envelope keeps the first part of each (the raw message is the source).
      const cut = Math.floor(INGEST_BODY_LIMIT / 4);
      body = Buffer.from(JSON.stringify({ ...envelope, text: envelope.text.slice(0, cut), html: envelope.html?.slice(0, cut) ?? null, truncated: true }));
    }
    const rows = withFiles && keptNow ? keptFiles(known, candidates, kept) : [];
    const files = rows.length ? { rows, expiresAt: filesExpireAt(target, mail) } : undefined;
    return { channel: 'email' as const, method: 'POST', path: '/', query: {}, headers: { 'content-type': 'application/json' }, contentType: 'application/json', body, source: { body: mail.raw, contentType: 'message/rfc822' }, files };
  };
  return { build, built };
}

const keptFiles = (known: IngestTarget, candidates: MeasuredAttachment[], kept: Set<string>): NewFile[] =>
  candidates
    .filter((a) => kept.has(a.id))
    .map((a) => ({ id: a.id, field: 'attachment', filename: a.filename, contentType: a.contentType, size: a.size, sha256: a.sha256, storageKey: storageKey(known.projectId, a.id) }));

const filesExpireAt = (target: IngestTarget, mail: Mail) => new Date(mail.receivedAt.getTime() + webhookQuotas(target.project, target).payload_retention_seconds * 1000);

/**
 * One message for one webhook, in the caller's transaction: what fits the file-storage quota's
 * room is kept, the rest is metadata only. Returns the event and the storage keys it keeps.
 */
async function recordMail(rt: Runtime, hook: MailForHook, mail: Mail, client: PoolClient): Promise<{ accepted: AcceptedEvent | null; keptKeys: string[] }> {
  const { known, candidates, publicId } = hook;
  // What fits the file-storage quota is kept (under its lock, in this transaction).
  const room = candidates.length ? await fileStorageRoom(rt, client, { project: known.project, webhook: { id: known.webhookId, quotaOverrides: known.quotaOverrides }, bytes: candidates.reduce((n, a) => n + a.size, 0) }) : 0;
  const kept = new Set<string>();
  let left = room;
  for (const a of candidates) if (a.size <= left) (left -= a.size), kept.add(a.id);
  const { build, built } = mailEvent(rt, hook, mail, kept, false);
  let accepted: AcceptedEvent;
  try {
    accepted = await acceptEvent(rt, publicId, { channel: 'email', build }, admitEmail(senderOf(mail)), client, { count: false });
  } catch (err) {
    // The allowlist changed since the early check: dropped (nothing was written for it; counted with the message).
    if (err instanceof SenderNotAllowed) return { accepted: null, keptKeys: [] };
    // This refuses the whole message (the transaction rolls back): counted as this webhook's refusal.
    countIngest('email', { refused: err });
    throw err;
  }
  if (accepted.status === 'duplicate' || !built.keptNow || kept.size === 0) return { accepted, keptKeys: [] };
  const target = built.target!;
  const files = keptFiles(known, candidates, kept);
  await recordFiles(rt, client, { project: target.project, webhook: { id: target.webhookId, quotaOverrides: target.quotaOverrides }, eventId: accepted.eventId, expiresAt: filesExpireAt(target, mail) }, files, { roomChecked: true });
  return { accepted, keptKeys: files.map((f) => f.storageKey) };
}

/**
 * A message for one webhook whose attachments fit the file-storage quota with room to spare (by
 * this process's recent reading): the event, its delivery and the attachments' rows in ONE
 * statement that commits on its own, as HTTP ingest. Null when the attachments turned out not to
 * fit after all (the statement stored nothing): the caller takes the room-checking path.
 */
async function acceptMailAlone(rt: Runtime, hook: MailForHook, mail: Mail): Promise<{ accepted: AcceptedEvent | null; keptKeys: string[] } | null> {
  const kept = new Set(hook.candidates.map((a) => a.id));
  const { build, built } = mailEvent(rt, hook, mail, kept, true);
  try {
    const accepted = await acceptEvent(rt, hook.publicId, { channel: 'email', build }, admitEmail(senderOf(mail)), undefined, { count: false });
    const keptKeys = accepted.status === 'duplicate' || !built.keptNow ? [] : hook.candidates.map((a) => storageKey(hook.known.projectId, a.id));
    return { accepted, keptKeys };
  } catch (err) {
    // Not a refusal: the room-checking path takes the message, and counts it.
    if (err instanceof QuotaExceeded && err.details.quota === 'file_storage_bytes') return null;
    // Dropped: counted with the message.
    if (err instanceof SenderNotAllowed) return { accepted: null, keptKeys: [] };
    countIngest('email', { refused: err });
    throw err;
  }
}

/**
 * A message for all its webhooks, all or nothing: every recipient's event (and kept files) is
 * written in ONE transaction, so `250` covers every RCPT and a refusal stores nothing for any.
 * A message for one webhook whose attachments fit with room to spare is one statement
 * (acceptMailAlone). Attachment content written but not recorded (refused, or over the quota's
 * room) is removed. The outcome is counted once final (countMessage): a webhook whose allowlist
 * refuses the sender, on the early check or on the ingest's own lookup, is one drop.
 */
async function acceptMessage(rt: Runtime, recipients: Map<string, string[]>, mail: Mail): Promise<AcceptedEvent[]> {
  const { allowed: byHook, dropped } = await allowedHooks(rt, recipients, senderOf(mail));
  if (byHook.size === 0) {
    countMessage([], dropped);
    return [];
  }
  const written: string[] = [];
  const keep = new Set<string>();
  let committed = false;
  try {
    const hooks: MailForHook[] = [];
    for (const [publicId, rcpt] of byHook) hooks.push(await prepareMail(rt, publicId, rcpt, mail, written));
    const alone = hooks.length === 1 ? hooks[0] : null;
    // Nothing to keep (no attachments, Free), or all of it fits with room to spare: one statement.
    const ample =
      alone !== null &&
      (alone.candidates.length === 0 ||
        fileStorageAmple(rt, { project: alone.known.project, webhook: { id: alone.known.webhookId, quotaOverrides: alone.known.quotaOverrides }, bytes: alone.candidates.reduce((n, a) => n + a.size, 0) }));
    // acceptEvent on the pool woke the runners after its commit.
    const one = ample ? await acceptMailAlone(rt, alone, mail) : null;
    if (one) {
      committed = true;
      for (const k of one.keptKeys) keep.add(k);
      const accepted = one.accepted ? [one.accepted] : [];
      countMessage(accepted, dropped + 1 - accepted.length);
      return accepted;
    }
    const accepted = await inTransaction(rt.db.pool, async (client) => {
      const out: AcceptedEvent[] = [];
      for (const hook of hooks) {
        const r = await recordMail(rt, hook, mail, client);
        if (r.accepted) out.push(r.accepted);
        for (const k of r.keptKeys) keep.add(k);
      }
      return out;
    });
    committed = true;
    // After the commit: the delivery jobs are there to be picked up.
    rt.runners.nudge();
    countMessage(accepted, dropped + hooks.length - accepted.length);
    return accepted;
  } finally {
    await discardContent(rt.config, committed ? written.filter((k) => !keep.has(k)) : written);
  }
}

export interface SmtpServerHandle {
  port: number;
  close(): Promise<void>;
}

/**
 * The SMTP server of email ingest (CONTRACT §7), started with the API half (`npm start`,
 * `start:api`). Mail for `{publicId}@{EMAIL_DOMAIN}`: each RCPT is decided on its own (550
 * unknown or archived, 450 paused, 451 a quota that refuses ingest, 452 storage); a message over
 * 60 MB is 552 (SIZE is advertised); `250` only once every recipient's event is stored. STARTTLS
 * when SMTP_TLS_CERT and SMTP_TLS_KEY are set, off otherwise. No AUTH: the address is the secret.
 */
export async function startSmtpServer(rt: Runtime, opts: { port: number; host?: string; socketTimeoutMs?: number }): Promise<SmtpServerHandle> {
  const { config } = rt;
  const tls = config.SMTP_TLS_CERT && config.SMTP_TLS_KEY ? { cert: readFileSync(config.SMTP_TLS_CERT), key: readFileSync(config.SMTP_TLS_KEY) } : null;
  const server = new SMTPServer({
    name: config.EMAIL_DOMAIN,
    banner: 'relay-service email ingest',
    size: EMAIL_LIMITS.messageBytes,
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(tls ? { cert: tls.cert, key: tls.key } : {}),
    socketTimeout: opts.socketTimeoutMs ?? 60_000,
    closeTimeout: 5_000,
    logger: false,
    disableReverseLookup: true,
    // Each client may buffer one message (up to 60 MB) in DATA: this bounds the memory it can take.
    maxClients: EMAIL_LIMITS.clients,
    onRcptTo(address: SMTPServerAddress, session: SMTPServerSession, callback: (err?: Error | null) => void) {
      void (async () => {
        const publicId = recipientPublicId(address.address, config.EMAIL_DOMAIN);
        if (!publicId) return callback(reply(550, '5.1.1 No such mailbox'));
        if (session.envelope.rcptTo.length >= EMAIL_LIMITS.recipients) return callback(reply(452, '4.5.3 Too many recipients'));
        try {
          // The raw message is stored with the event: a declared SIZE that would not fit the stored-bytes quota is refused now (452).
          const args = session.envelope.mailFrom ? (session.envelope.mailFrom.args as Record<string, string> | false) : false;
          const declared = args ? Number(args.SIZE) || 0 : 0;
          // A refusal decided on a kept lookup (paused, gone, a quota) is decided again on a fresh one.
          await ingestTargets(rt).decide(rt, publicId, async (target) => {
            if (!target || target.status === 'archived') throw new NotFound('webhook');
            if (target.status === 'paused') throw new WebhookPaused();
            const refusing = await ingestRefusalHint(rt, target.project, { id: target.webhookId, quotaOverrides: target.quotaOverrides }, { bytes: declared });
            if (refusing) throw new QuotaExceeded({ quota: refusing, scope: 'project', limit: 0, current: 0, delta: 1 });
          });
          callback();
        } catch (err) {
          callback(smtpRefusal(err));
        }
      })();
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) {
      void (async () => {
        const receivedAt = new Date();
        const chunks: Buffer[] = [];
        let size = 0;
        try {
          for await (const c of stream) {
            size += (c as Buffer).length;
            // Over the limit, the rest is read and dropped (smtp-server marks sizeExceeded).
            if (size <= EMAIL_LIMITS.messageBytes) chunks.push(c as Buffer);
          }
        } catch {
          return callback(reply(451, '4.4.2 Connection lost during DATA'));
        }
        if (stream.sizeExceeded || size > EMAIL_LIMITS.messageBytes) return callback(reply(552, `5.3.4 Message over ${EMAIL_LIMITS.messageBytes} bytes`));
        const raw = Buffer.concat(chunks);
        chunks.length = 0;
        let parsed: ParsedMail;
        try {
          // maxChildNodes: mailparser's splitter option (not in its types), 1000 parts by default.
          // checksumAlgo: each attachment's sha256 is computed while it is decoded (not md5, then sha256 again).
          const options = { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, checksumAlgo: 'sha256', maxChildNodes: EMAIL_LIMITS.mimeParts };
          parsed = await simpleParser(raw, options as Parameters<typeof simpleParser>[1]);
        } catch (err) {
          return callback(reply(554, `5.6.0 The message cannot be parsed: ${(err as Error).message}`));
        }
        // Recipients by webhook: each accepted RCPT named one.
        const byHook = new Map<string, string[]>();
        for (const r of session.envelope.rcptTo) {
          const id = recipientPublicId(r.address, config.EMAIL_DOMAIN);
          if (id) byHook.set(id, [...(byHook.get(id) ?? []), r.address]);
        }
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        const mail: Mail = { mailFrom, parsed, raw, attachments: parsed.attachments.map(measure), receivedAt };
        try {
          const accepted = await acceptMessage(rt, byHook, mail);
          // A sender no allowlist takes gets 250 too (no bounce to a possibly forged sender): nothing was stored.
          callback(null, accepted.length ? `2.0.0 Stored as ${accepted.map((a) => a.eventId).join(' ')}` : '2.0.0 Accepted');
        } catch (err) {
          callback(smtpRefusal(err));
        }
      })();
    },
  });
  server.on('error', (err) => log.warn({ err }, 'smtp server error'));
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`SMTP port ${opts.port} is already in use on ${opts.host ?? '0.0.0.0'} (set SMTP_PORT)`) : err);
    server.server.once('error', onError);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      server.server.off('error', onError);
      resolve();
    });
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Email ingest: its SMTP server, started by the API half on SMTP_PORT (not mounted on HTTP). */
export const emailChannel: IngestChannel = {
  name: 'email',
  server: {
    async start(rt, opts) {
      const { config } = rt;
      const smtp = await startSmtpServer(rt, { port: opts.port ?? config.SMTP_PORT, host: config.HOST, socketTimeoutMs: config.SMTP_TIMEOUT_MS });
      log.info({ port: smtp.port, domain: config.EMAIL_DOMAIN }, 'smtp server listening');
      return smtp;
    },
  },
};
