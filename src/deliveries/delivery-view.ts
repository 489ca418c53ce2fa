import type { DestinationSnapshot } from '../destinations/config.ts';
/** A delivery as the API shows it (camelCase, ISO timestamps), built from a `deliveries` row. */
export interface DeliveryView {
  id: string;
  projectId: string;
  webhookId: string;
  eventId: string;
  status: string;
  destination: unknown;
  attempts: number;
  nextAttemptAt: string | null;
  lastAttempt: { statusCode: number | null; durationMs: number | null; error: string | null; at?: string } | null;
  replayOf: string | null;
  automationId: string | null;
  automationVersion: number | null;
  idempotencyKey: string | null;
  createdAt: string;
  completedAt: string | null;
}

const iso = (v: unknown) => (v == null ? null : v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

/** Credentials never leave the service, even in the snapshot. */
export function publicDestination(snapshot: unknown): unknown {
  if (!snapshot || typeof snapshot !== 'object') return snapshot;
  const { config, ...rest } = snapshot as { config?: unknown };
  if (!config || typeof config !== 'object') return snapshot;
  const { credentials: _c, credentialsEnc: _e, secretEnc: _s, ...safe } = config as Record<string, unknown>;
  return { ...rest, config: safe };
}

/**
 * A `deliveries` row as pg returns it (snake_case columns; statements that join add columns of
 * their own, hence the index signature).
 */
export interface DeliveryRow {
  id: string;
  project_id: string;
  webhook_id: string;
  event_id: string;
  destination: DestinationSnapshot | null;
  status: string;
  attempts: number;
  next_attempt_at: Date | null;
  last_attempt: unknown;
  replay_of_id: string | null;
  created_at: Date;
  completed_at: Date | null;
  [column: string]: unknown;
}

/** The delivery as the API shows it, from a pg row (snake_case) or a Prisma record (camelCase). */
export function deliveryView(row: { id: string; status: string; attempts: number; destination?: unknown; [column: string]: unknown }): DeliveryView {
  const g = (camel: string, snake: string) => (row[camel] !== undefined ? row[camel] : row[snake]);
  return {
    id: row.id,
    projectId: g('projectId', 'project_id') as string,
    webhookId: g('webhookId', 'webhook_id') as string,
    eventId: g('eventId', 'event_id') as string,
    status: row.status,
    destination: publicDestination(row.destination),
    attempts: row.attempts,
    nextAttemptAt: iso(g('nextAttemptAt', 'next_attempt_at')),
    lastAttempt: (g('lastAttempt', 'last_attempt') as DeliveryView['lastAttempt'] | undefined) ?? null,
    replayOf: (g('replayOfId', 'replay_of_id') as string | null | undefined) ?? null,
    automationId: (g('automationId', 'automation_id') as string | null | undefined) ?? null,
    automationVersion: (g('automationVersion', 'automation_version') as number | null | undefined) ?? null,
    idempotencyKey: (g('idempotencyKey', 'idempotency_key') as string | null | undefined) ?? null,
    createdAt: iso(g('createdAt', 'created_at'))!,
    completedAt: iso(g('completedAt', 'completed_at')),
  };
}

export const ACTIVE_STATUSES = ['queued', 'scheduled', 'delivering', 'retrying'] as const;
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
