import { TierRequired } from '../errors.ts';
import { FEATURE_TIERS, tierAtLeast, type Feature } from './tiers.ts';

const FEATURE_NAMES: Record<Feature, string> = {
  raw_file_content: 'Raw file content from email and form ingest',
  provider_packs: 'Provider packs',
  classic_transforms: 'Classic payload transforms',
  automations: 'Automations',
  automation_egress_policies: 'Self-service automation egress policies',
  custom_retry_policy: 'Custom retry policies',
  custom_headers: 'Custom outbound headers',
  recurring_schedules: 'Recurring schedules',
  bulk_replay: 'Bulk replay and bulk DLQ re-drive',
  typed_destinations: 'Typed non-HTTP destinations',
  strict_fifo: 'Strict FIFO delivery',
  default_delay: 'Default delivery delay',
  throttling: 'Throttling',
  operator_alerting: 'Operator alerting',
  event_drains: 'Event drains',
  audit_log_api: 'Audit log API',
  overage: 'Monthly delivery overage',
  email_allowlists: 'Email sender allowlists',
};

export function hasFeature(tier: string, feature: Feature): boolean {
  return tierAtLeast(tier, FEATURE_TIERS[feature]);
}

/** 403 tier_required (with `feature` and `requiredTier`) when the project's tier is below the feature's. */
export function requireFeature(tier: string, feature: Feature): void {
  if (!hasFeature(tier, feature)) {
    const err = new TierRequired(FEATURE_NAMES[feature], FEATURE_TIERS[feature]);
    (err.details as { feature: string }).feature = feature;
    throw err;
  }
}
