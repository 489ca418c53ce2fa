import type pg from 'pg';
import type { DestinationSnapshot } from '../destinations/config.ts';
import type { ProviderPack } from '../providers/index.ts';
import type { RoutingRule } from '../routing/rules.ts';

/** Everything ingest needs about a webhook (cached per process: see ingest-target-cache.ts). */
export interface IngestTarget {
  webhookId: string;
  /** webhooks.config_version when read: the event is stored only while it is still this. */
  configVersion: number;
  /** When the first of ingestSecrets (or the provider pack's grace secrets) expires, if any: the read is good until then. */
  secretsExpireAt: Date | null;
  projectId: string;
  status: 'active' | 'paused' | 'archived';
  deliveryMode: 'parallel' | 'strict_fifo';
  defaultDelaySeconds: number | null;
  routing: RoutingRule[];
  quotaOverrides: Record<string, unknown>;
  project: { id: string; tier: string; customQuotas: Record<string, unknown>; overageEnabled: boolean };
  /** Sealed ingest secrets valid now: the current one and any still in a rotation's grace period. */
  ingestSecrets: string[];
  /** The provider pack whose signatures ingest also accepts, if any (its secret sealed). */
  providerPack: ProviderPack | null;
  /** Inbound deduplication window by the provider's delivery id, in seconds (0: off). */
  dedupeWindowSeconds: number;
  /** How long idempotency keys are remembered, in seconds (0: recorded, never enforced). */
  idempotencyWindowSeconds: number;
  /** Form ingest's credential: the ingest secret, or none (the publicId). */
  formAccess: 'secret' | 'public';
  /** Origins a browser may post the form from: `*` or exact origins. */
  formAllowedOrigins: string[];
  /** Email senders taken (lower-cased patterns); empty: every sender. */
  emailAllowlist: string[];
  /** The default destination and those the rules name. */
  destinations: (DestinationSnapshot & { isDefault: boolean })[];
}

/** What a publicId looks like (hook_ + lower-case hex or base32): anything else is unknown without a query. */
export const PUBLIC_ID = /^hook_[0-9a-z]{16,64}$/;

/**
 * Reads the webhook, its project, its valid ingest secrets and the destinations routing can
 * pick, in one round trip (a prepared statement).
 */
export async function findIngestTarget(db: pg.Pool | pg.PoolClient, publicId: string): Promise<IngestTarget | null> {
  const { rows } = await db.query({
    name: 'find_ingest_target',
    text: `
SELECT w.id, w.config_version, w.project_id, w.status, w.delivery_mode, w.default_delay_seconds, w.routing, w.quota_overrides, w.provider_pack, w.dedupe_window_seconds,
       w.idempotency_window_seconds, w.form_access, w.form_allowed_origins,
       p.tier, p.custom_quotas, p.overage_enabled,
       ARRAY(SELECT s.secret_enc FROM webhook_secrets s
              WHERE s.webhook_id = w.id AND s.kind = 'ingest' AND (s.expires_at IS NULL OR s.expires_at > now())
              ORDER BY s.version DESC) AS ingest_secrets,
       ARRAY(SELECT s.secret_enc FROM webhook_secrets s
              WHERE s.webhook_id = w.id AND s.kind = 'provider' AND s.expires_at > now()
              ORDER BY s.version DESC) AS provider_grace_secrets,
       (SELECT min(s.expires_at) FROM webhook_secrets s
         WHERE s.webhook_id = w.id AND s.kind IN ('ingest', 'provider') AND s.expires_at > now()) AS secrets_expire_at,
       ARRAY(SELECT e.pattern FROM email_allowlist_entries e WHERE e.webhook_id = w.id) AS email_allowlist,
       (SELECT coalesce(json_agg(json_build_object('id', d.id, 'name', d.name, 'type', d.type, 'config', d.config, 'isDefault', d.is_default)), '[]')
          FROM destinations d
         WHERE d.webhook_id = w.id
           AND (d.is_default OR d.id IN (SELECT r->>'destinationId' FROM jsonb_array_elements(w.routing) r))) AS destinations
  FROM webhooks w
  JOIN projects p ON p.id = w.project_id
 WHERE w.public_id = $1`,
    values: [publicId],
  });
  const r = rows[0];
  if (!r) return null;
  return {
    webhookId: r.id,
    configVersion: r.config_version,
    secretsExpireAt: r.secrets_expire_at,
    projectId: r.project_id,
    status: r.status,
    deliveryMode: r.delivery_mode,
    defaultDelaySeconds: r.default_delay_seconds,
    routing: r.routing,
    quotaOverrides: r.quota_overrides,
    project: { id: r.project_id, tier: r.tier, customQuotas: r.custom_quotas, overageEnabled: r.overage_enabled },
    ingestSecrets: r.ingest_secrets,
    providerPack: r.provider_pack && { ...r.provider_pack, graceSecretsEnc: r.provider_grace_secrets },
    dedupeWindowSeconds: r.dedupe_window_seconds,
    idempotencyWindowSeconds: r.idempotency_window_seconds,
    formAccess: r.form_access,
    formAllowedOrigins: r.form_allowed_origins ?? ['*'],
    emailAllowlist: r.email_allowlist,
    destinations: r.destinations,
  };
}
