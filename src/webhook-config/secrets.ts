import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { InvalidRequest } from '../errors.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import type { Runtime } from '../runtime.ts';
import { encryptSecret, openSecret } from '../encryption.ts';
import { getWebhook } from './get-webhook.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;
export type SecretKind = 'ingest' | 'signing';

export const DEFAULT_GRACE_SECONDS = 86_400;
const MAX_GRACE_SECONDS = 30 * 86_400;

/** A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export { openSecret };

/** Version 1 of both secrets for a new webhook, inside the creating transaction. */
export async function createInitialSecrets(tx: Prisma.TransactionClient, projectId: string, webhookId: string) {
  const ingestSecret = generateWebhookSecret();
  const signingSecret = generateWebhookSecret();
  await tx.webhookSecret.createMany({
    data: [
      { id: newId('whs'), projectId, webhookId, kind: 'ingest', version: 1, secretEnc: encryptSecret(ingestSecret) },
      { id: newId('whs'), projectId, webhookId, kind: 'signing', version: 1, secretEnc: encryptSecret(signingSecret) },
    ],
  });
  return { ingestSecret, signingSecret };
}

export function parseGraceSeconds(raw: unknown): number {
  if (raw === undefined || raw === null) return DEFAULT_GRACE_SECONDS;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw > MAX_GRACE_SECONDS) {
    throw new InvalidRequest(`graceSeconds must be an integer between 0 and ${MAX_GRACE_SECONDS}.`, 'graceSeconds');
  }
  return raw;
}

/**
 * Makes a new current secret of `kind`; the previous current one stays valid for
 * `graceSeconds`. The new secret is returned here only.
 */
export async function rotateSecret(rt: Rt, projectId: string, webhookId: string, kind: SecretKind, graceSecondsRaw: unknown) {
  await getWebhook(rt, projectId, webhookId);
  const graceSeconds = parseGraceSeconds(graceSecondsRaw);
  const secret = generateWebhookSecret();
  const rotated = await rt.db.prisma.$transaction(async (tx) => {
    // Serialises rotations of one webhook, so versions stay consecutive and one is current.
    await tx.$queryRaw`SELECT id FROM webhooks WHERE id = ${webhookId} FOR UPDATE`;
    const now = new Date();
    const previousExpiresAt = new Date(now.getTime() + graceSeconds * 1000);
    const last = await tx.webhookSecret.findFirst({ where: { webhookId, kind }, orderBy: { version: 'desc' } });
    await tx.webhookSecret.updateMany({ where: { webhookId, kind, expiresAt: null }, data: { expiresAt: previousExpiresAt } });
    const row = await tx.webhookSecret.create({
      data: { id: newId('whs'), projectId, webhookId, kind, version: (last?.version ?? 0) + 1, secretEnc: encryptSecret(secret), createdAt: now },
    });
    return { webhookId, kind, version: row.version, createdAt: row.createdAt, previousExpiresAt, secret };
  });
  ingestTargetsChanged(rt, { webhookId });
  return rotated;
}

export type SecretState = 'current' | 'grace' | 'expired';

export function secretState(expiresAt: Date | null, now = new Date()): SecretState {
  if (expiresAt === null) return 'current';
  return expiresAt.getTime() > now.getTime() ? 'grace' : 'expired';
}

/** Every version of both secrets, without the secrets themselves. */
export async function listSecretVersions(rt: Rt, projectId: string, webhookId: string) {
  await getWebhook(rt, projectId, webhookId);
  const rows = await rt.db.prisma.webhookSecret.findMany({
    where: { webhookId },
    orderBy: [{ kind: 'asc' }, { version: 'desc' }],
    select: { kind: true, version: true, createdAt: true, expiresAt: true },
  });
  const now = new Date();
  return rows.map((r) => ({ ...r, state: secretState(r.expiresAt, now) }));
}

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/**
 * For the delivery engine: the plaintext signing secrets to sign with right now, the
 * current one first, then those still in a rotation's grace period.
 */
export async function activeSigningSecrets(db: Rt | Queryable, webhookId: string): Promise<string[]> {
  const q: Queryable = 'db' in db ? db.db.pool : db;
  const { rows } = await q.query<{ secret_enc: string }>(
    `SELECT secret_enc FROM webhook_secrets
      WHERE webhook_id = $1 AND kind = 'signing' AND (expires_at IS NULL OR expires_at > now())
      ORDER BY (expires_at IS NULL) DESC, version DESC`,
    [webhookId],
  );
  return rows.map((r) => openSecret(r.secret_enc));
}
