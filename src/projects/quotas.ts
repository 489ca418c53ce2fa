import type pg from 'pg';
import type { Runtime } from '../runtime.ts';

export interface IngestQuotaInput {
  project: { id: string; tier: string; customQuotas: unknown; overageEnabled: boolean };
  webhook: { id: string; quotaOverrides: unknown };
  /** Size of the payload that would be retained. */
  bodyBytes: number;
}

/**
 * Quota checks on the ingest path: ingest rate (429), stored payload bytes and backlog
 * depth (409), monthly deliveries (429). Throws QuotaExceeded with the contract's fields.
 * `client` is the ingest transaction's connection when the caller holds one.
 */
export async function enforceIngestQuotas(_rt: Runtime, _client: pg.PoolClient | null, _input: IngestQuotaInput): Promise<void> {
  // Filled in by the tiers-and-quotas work (issue 6); the ingest path already calls it.
}
