import { InvalidRequest } from '../errors.ts';
import { encryptSecret } from '../encryption.ts';
import { Prisma } from '../generated/prisma/client.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { findProvider, PROVIDERS, type Provider, type ProviderPack } from './index.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';
import { newId } from '../ids.ts';
import { parseGraceSeconds } from '../webhook-config/secrets.ts';

type Rt = Pick<Runtime, 'db'>;

/** A webhook's provider pack as shown: never the secret. */
export interface ProviderConfigView {
  webhookId: string;
  /** null: no provider pack. */
  provider: string | null;
  /** The timestamp tolerance in force: as set, else the provider's default; null when the scheme signs no timestamp. */
  toleranceSeconds: number | null;
}

export const MAX_TOLERANCE_SECONDS = 86_400;
const MAX_SECRET_LENGTH = 4096;

function view(webhookId: string, pack: ProviderPack | null): ProviderConfigView {
  if (!pack) return { webhookId, provider: null, toleranceSeconds: null };
  return { webhookId, provider: pack.provider, toleranceSeconds: pack.toleranceSeconds ?? findProvider(pack.provider)?.toleranceSeconds ?? null };
}

export async function getProviderConfig(rt: Rt, projectId: string, webhookId: string): Promise<ProviderConfigView> {
  const webhook = await getWebhook(rt, projectId, webhookId);
  return view(webhookId, webhook.providerPack as ProviderPack | null);
}

export interface ProviderConfigInput {
  provider?: string | null;
  secret?: string | null;
  toleranceSeconds?: number | null;
  /** How long the previous secret stays valid when `secret` replaces it for the same provider (default 86400, 0: dropped at once). */
  graceSeconds?: number | null;
}

/**
 * `{provider, secret, toleranceSeconds?, graceSeconds?}` sets the webhook's provider pack (Starter
 * and above); `{provider: null}` removes it. The secret is sealed at rest and never shown; left
 * out, it is kept when the provider stays the same. A new secret for the same provider keeps the
 * previous one valid for `graceSeconds` (default 86400, 0: dropped at once); another provider
 * drops the old one at once. Each secret is a version in webhook_secrets (kind `provider`, listed
 * by GET /v1/webhooks/{id}/secrets); the pack holds the current one. Saving raises the webhook's
 * lookup version (triggers).
 */
export async function setProviderConfig(rt: Rt, projectId: string, webhookId: string, input: ProviderConfigInput): Promise<ProviderConfigView> {
  const webhook = await getWebhook(rt, projectId, webhookId);
  if (input.provider === undefined) throw new InvalidRequest('provider is required: one of GET /v1/providers, or null to remove the provider pack.', 'provider');
  if (input.provider === null) {
    for (const f of ['secret', 'toleranceSeconds'] as const) {
      if (input[f] !== undefined && input[f] !== null) throw new InvalidRequest(`${f} is not taken when provider is null.`, f);
    }
    await rt.db.prisma.$transaction([
      rt.db.prisma.webhookSecret.deleteMany({ where: { webhookId, kind: PROVIDER_SECRET } }),
      rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { providerPack: Prisma.DbNull } }),
    ]);
    ingestTargetsChanged(rt, { webhookId });
    return view(webhookId, null);
  }
  requireFeature((await getProject(rt, projectId)).tier, 'provider_packs');
  const provider = findProvider(input.provider);
  if (!provider) throw new InvalidRequest(`provider must be one of ${PROVIDERS.map((p) => p.id).join(', ')}, or null.`, 'provider');
  const current = webhook.providerPack as ProviderPack | null;
  let secretEnc: string;
  if (input.secret === undefined || input.secret === null) {
    if (current?.provider !== provider.id) throw new InvalidRequest(`secret is required: ${provider.secret}.`, 'secret');
    secretEnc = current.secretEnc;
  } else {
    if (typeof input.secret !== 'string' || input.secret.trim() === '' || input.secret.length > MAX_SECRET_LENGTH) {
      throw new InvalidRequest(`secret must be a non-empty string of at most ${MAX_SECRET_LENGTH} characters: ${provider.secret}.`, 'secret');
    }
    secretEnc = encryptSecret(input.secret.trim());
  }
  const toleranceSeconds = parseTolerance(provider, input.toleranceSeconds);
  const graceSeconds = parseGraceSeconds(input.graceSeconds);
  const pack: ProviderPack = { provider: provider.id, secretEnc, toleranceSeconds };
  await rt.db.prisma.$transaction(async (tx) => {
    // Serialises changes of one webhook's pack, so versions stay consecutive and one is current.
    const [locked] = await tx.$queryRaw<{ provider_pack: ProviderPack | null }[]>`SELECT provider_pack FROM webhooks WHERE id = ${webhookId} FOR UPDATE`;
    const before = locked?.provider_pack ?? null;
    if (before?.provider !== provider.id) {
      // Another provider (or none before): the old secrets go at once.
      await tx.webhookSecret.deleteMany({ where: { webhookId, kind: PROVIDER_SECRET } });
      await tx.webhookSecret.create({ data: { id: newId('whs'), projectId, webhookId, kind: PROVIDER_SECRET, version: 1, secretEnc } });
    } else if (secretEnc !== before.secretEnc) {
      const now = new Date();
      const expiresAt = new Date(now.getTime() + graceSeconds * 1000);
      const last = await tx.webhookSecret.findFirst({ where: { webhookId, kind: PROVIDER_SECRET }, orderBy: { version: 'desc' } });
      let version = last?.version ?? 0;
      // A pack set before secrets had versions: its secret becomes the previous version.
      if (!last) await tx.webhookSecret.create({ data: { id: newId('whs'), projectId, webhookId, kind: PROVIDER_SECRET, version: ++version, secretEnc: before.secretEnc, expiresAt } });
      else await tx.webhookSecret.updateMany({ where: { webhookId, kind: PROVIDER_SECRET, expiresAt: null }, data: { expiresAt } });
      await tx.webhookSecret.create({ data: { id: newId('whs'), projectId, webhookId, kind: PROVIDER_SECRET, version: version + 1, secretEnc, createdAt: now } });
    }
    await tx.webhook.update({ where: { id: webhookId }, data: { providerPack: pack as unknown as Prisma.InputJsonValue } });
  });
  ingestTargetsChanged(rt, { webhookId });
  return view(webhookId, pack);
}

/** The kind of the provider pack's secret versions in webhook_secrets. */
const PROVIDER_SECRET = 'provider';

function parseTolerance(provider: Provider, raw: unknown): number | null {
  if (raw === undefined || raw === null) return null;
  if (provider.toleranceSeconds === null) throw new InvalidRequest(`${provider.name} signs no timestamp: toleranceSeconds is not taken.`, 'toleranceSeconds');
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1 || raw > MAX_TOLERANCE_SECONDS) {
    throw new InvalidRequest(`toleranceSeconds must be an integer between 1 and ${MAX_TOLERANCE_SECONDS}.`, 'toleranceSeconds');
  }
  return raw;
}

/** The supported providers, as `GET /v1/providers` lists them. */
export function listProviders() {
  return PROVIDERS.map((p) => ({
    id: p.id,
    name: p.name,
    secret: p.secret,
    header: p.header,
    scheme: p.scheme,
    toleranceSeconds: p.toleranceSeconds,
    eventType: p.eventType.map(describe),
    deliveryId: p.deliveryId.map(describe),
  }));
}

const describe = (l: Provider['eventType'][number]) => ('header' in l ? `header ${l.header}` : `body ${l.body}`);
