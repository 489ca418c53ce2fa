import type { QuotaName } from '../errors.ts';
import type { Tier } from '../config.ts';

export const TIER_ORDER: Tier[] = ['free', 'starter', 'pro', 'business', 'enterprise'];

export function tierAtLeast(tier: string, required: Tier): boolean {
  return TIER_ORDER.indexOf(tier as Tier) >= TIER_ORDER.indexOf(required);
}

const MB = 1024 * 1024;
const GB = 1024 * MB;
const DAY = 86_400;

export interface TierQuotas {
  monthly_deliveries: number;
  ingest_rate: number;
  stored_payload_bytes: number;
  file_storage_bytes: number;
  backlog_depth: number;
  replay_volume: number;
  history_retention_seconds: number;
  payload_retention_seconds: number;
}

/** The spec's tier quota table, as data. */
export const TIER_QUOTAS: Record<Tier, TierQuotas> = {
  free: { monthly_deliveries: 5_000, ingest_rate: 3, stored_payload_bytes: 50 * MB, file_storage_bytes: 0, backlog_depth: 500, replay_volume: 50, history_retention_seconds: 7 * DAY, payload_retention_seconds: 3 * DAY },
  starter: { monthly_deliveries: 25_000, ingest_rate: 10, stored_payload_bytes: 500 * MB, file_storage_bytes: 5 * GB, backlog_depth: 2_000, replay_volume: 500, history_retention_seconds: 14 * DAY, payload_retention_seconds: 7 * DAY },
  pro: { monthly_deliveries: 250_000, ingest_rate: 25, stored_payload_bytes: 2 * GB, file_storage_bytes: 20 * GB, backlog_depth: 10_000, replay_volume: 5_000, history_retention_seconds: 30 * DAY, payload_retention_seconds: 14 * DAY },
  business: { monthly_deliveries: 1_500_000, ingest_rate: 50, stored_payload_bytes: 5 * GB, file_storage_bytes: 100 * GB, backlog_depth: 25_000, replay_volume: 15_000, history_retention_seconds: 30 * DAY, payload_retention_seconds: 14 * DAY },
  enterprise: { monthly_deliveries: 10_000_000, ingest_rate: 100, stored_payload_bytes: 10 * GB, file_storage_bytes: 500 * GB, backlog_depth: 50_000, replay_volume: 50_000, history_retention_seconds: 30 * DAY, payload_retention_seconds: 14 * DAY },
};

export const QUOTA_NAMES: (keyof TierQuotas)[] = Object.keys(TIER_QUOTAS.free) as (keyof TierQuotas)[];

/** The Automation quotas (their table is src/automations/limits.ts), which an Enterprise project's custom quotas may also set. */
export const AUTOMATION_QUOTA_NAMES = [
  'automations',
  'active_automations',
  'automation_versions',
  'automation_runs',
  'automation_cpu_ms',
  'automation_subrequests',
  'automation_log_bytes',
  'automation_worker_creations',
  'automation_concurrency',
] as const;

/** The spec's feature-gate table, as data: the lowest tier that has each feature. */
export const FEATURE_TIERS = {
  raw_file_content: 'starter',
  provider_packs: 'starter',
  classic_transforms: 'starter',
  automations: 'starter',
  automation_egress_policies: 'enterprise',
  custom_retry_policy: 'starter',
  custom_headers: 'starter',
  recurring_schedules: 'starter',
  bulk_replay: 'starter',
  typed_destinations: 'pro',
  strict_fifo: 'pro',
  default_delay: 'pro',
  throttling: 'pro',
  operator_alerting: 'pro',
  event_drains: 'pro',
  audit_log_api: 'business',
  overage: 'starter',
  email_allowlists: 'starter',
} as const satisfies Record<string, Tier>;

export type Feature = keyof typeof FEATURE_TIERS;

export type { QuotaName };
