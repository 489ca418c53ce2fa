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
  createdAt: string;
  completedAt: string | null;
}

const iso = (v: unknown) => (v == null ? null : v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

/** Credentials never leave the service, even in the snapshot. */
export function publicDestination(snapshot: any): unknown {
  if (!snapshot || typeof snapshot !== 'object') return snapshot;
  const { config, ...rest } = snapshot;
  if (!config || typeof config !== 'object') return snapshot;
  const { credentials: _c, credentialsEnc: _e, secretEnc: _s, ...safe } = config;
  return { ...rest, config: safe };
}

export function deliveryView(row: any): DeliveryView {
  const g = (camel: string, snake: string) => (row[camel] !== undefined ? row[camel] : row[snake]);
  return {
    id: row.id,
    projectId: g('projectId', 'project_id'),
    webhookId: g('webhookId', 'webhook_id'),
    eventId: g('eventId', 'event_id'),
    status: row.status,
    destination: publicDestination(row.destination),
    attempts: row.attempts,
    nextAttemptAt: iso(g('nextAttemptAt', 'next_attempt_at')),
    lastAttempt: g('lastAttempt', 'last_attempt') ?? null,
    replayOf: g('replayOfId', 'replay_of_id') ?? null,
    createdAt: iso(g('createdAt', 'created_at'))!,
    completedAt: iso(g('completedAt', 'completed_at')),
  };
}

export const ACTIVE_STATUSES = ['queued', 'scheduled', 'delivering', 'retrying'] as const;
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
