/**
 * The REST surface: every `/v1` route, the GraphQL field SOFA maps it to, its method, its
 * success status and how the OpenAPI document names and groups it. One table; nothing else
 * defines REST routes.
 */
import { DLQ_EXPORT_PAGE_SIZE } from '../deliveries/replay.ts';

export interface RestRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Relative to /v1, with `:name` path parameters matching field arguments. */
  path: string;
  /** `Query.name` or `Mutation.name`. */
  field: string;
  status?: 200 | 201 | 202;
  /** Stable name of the operation in the OpenAPI document and the generated clients. */
  operationId: string;
  /** The domain it belongs to: one tag of the OpenAPI document. */
  tag: RestTag;
  /**
   * Failures of this route beyond those every route shares (401, 500, 503; 400 for input,
   * 404 for a path id, 413 for a body). They come from the domain services it calls.
   */
  errors?: RouteError[];
  /** A cursor list whose page size is not the usual (default 20, at most 100). */
  pageSize?: { def: number; max: number };
  /** Takes `application/x-www-form-urlencoded` bodies with bracket notation beside JSON (CONTRACT §5). */
  form?: true;
}

export type RestTag = 'Project' | 'Webhooks' | 'Destinations' | 'Routing' | 'Providers' | 'Automations' | 'Schedules' | 'Observability' | 'Deliveries' | 'DLQ' | 'Files' | 'Contacts' | 'Messages';

/**
 * `tier_required` (403); `invalid_state` or `payload_gone` (409); `not_found` (404) for an id
 * named in the body; `replay_quotas`: what creating a delivery by replay is checked against
 * (429 `replay_volume` and `monthly_deliveries`, 409 `backlog_depth`); `ingest`: what an ingest
 * answers (409 `webhook_paused`, the ingest quotas but the rate: 429 `monthly_deliveries`, 409
 * `backlog_depth` and `stored_payload_bytes`); `automation_counts`: 409 `automations`,
 * `active_automations`, `automation_versions` and 429 `automation_worker_creations`;
 * `automation_runs`: 429 `automation_runs`, `automation_cpu_ms`, `automation_subrequests`,
 * `automation_log_bytes`, `automation_concurrency` (a run refused); `already_exists` (409).
 */
export type RouteError = 'tier_required' | 'invalid_state' | 'payload_gone' | 'not_found' | 'replay_quotas' | 'ingest' | 'automation_counts' | 'automation_runs' | 'drain_quota' | 'already_exists';

export const REST_ROUTES: RestRoute[] = [
  // projects
  { method: 'GET', path: '/project', field: 'Query.project', operationId: 'getProject', tag: 'Project' },
  { method: 'PATCH', path: '/project', field: 'Mutation.updateProject', operationId: 'updateProject', tag: 'Project', errors: ['tier_required'] },
  { method: 'GET', path: '/usage', field: 'Query.usage', operationId: 'getUsage', tag: 'Project' },
  { method: 'GET', path: '/project/api-keys', field: 'Query.apiKeys', operationId: 'listApiKeys', tag: 'Project' },
  { method: 'POST', path: '/project/api-keys', field: 'Mutation.createApiKey', status: 201, operationId: 'createApiKey', tag: 'Project' },
  { method: 'POST', path: '/project/api-keys/:id/revoke', field: 'Mutation.revokeApiKey', operationId: 'revokeApiKey', tag: 'Project' },
  { method: 'GET', path: '/project/audit-logs', field: 'Query.auditLogs', operationId: 'listAuditLogs', tag: 'Project', errors: ['tier_required'] },
  { method: 'GET', path: '/webhooks/:id/quota-overrides', field: 'Query.webhookQuotaOverrides', operationId: 'getWebhookQuotaOverrides', tag: 'Webhooks' },
  { method: 'PUT', path: '/webhooks/:id/quota-overrides', field: 'Mutation.setWebhookQuotaOverrides', operationId: 'setWebhookQuotaOverrides', tag: 'Webhooks' },

  // webhooks
  { method: 'GET', path: '/webhooks', field: 'Query.webhooks', operationId: 'listWebhooks', tag: 'Webhooks' },
  { method: 'POST', path: '/webhooks', field: 'Mutation.createWebhook', status: 201, operationId: 'createWebhook', tag: 'Webhooks', errors: ['tier_required'] },
  { method: 'GET', path: '/webhooks/:id', field: 'Query.webhook', operationId: 'getWebhook', tag: 'Webhooks' },
  { method: 'PATCH', path: '/webhooks/:id', field: 'Mutation.updateWebhook', operationId: 'updateWebhook', tag: 'Webhooks', errors: ['tier_required'] },
  { method: 'POST', path: '/webhooks/:id/pause', field: 'Mutation.pauseWebhook', operationId: 'pauseWebhook', tag: 'Webhooks', errors: ['invalid_state'] },
  { method: 'POST', path: '/webhooks/:id/resume', field: 'Mutation.resumeWebhook', operationId: 'resumeWebhook', tag: 'Webhooks', errors: ['invalid_state'] },
  { method: 'POST', path: '/webhooks/:id/archive', field: 'Mutation.archiveWebhook', operationId: 'archiveWebhook', tag: 'Webhooks', errors: ['invalid_state'] },
  { method: 'POST', path: '/webhooks/:id/restore', field: 'Mutation.restoreWebhook', operationId: 'restoreWebhook', tag: 'Webhooks', errors: ['invalid_state'] },
  { method: 'POST', path: '/webhooks/:id/destroy', field: 'Mutation.destroyWebhook', operationId: 'destroyWebhook', tag: 'Webhooks', errors: ['invalid_state'] },
  { method: 'POST', path: '/webhooks/:id/rotate-ingest-secret', field: 'Mutation.rotateIngestSecret', operationId: 'rotateIngestSecret', tag: 'Webhooks' },
  { method: 'POST', path: '/webhooks/:id/rotate-signing-secret', field: 'Mutation.rotateSigningSecret', operationId: 'rotateSigningSecret', tag: 'Webhooks' },
  { method: 'GET', path: '/webhooks/:id/secrets', field: 'Query.webhookSecrets', operationId: 'listWebhookSecrets', tag: 'Webhooks' },
  { method: 'GET', path: '/webhooks/:id/email-allowlist', field: 'Query.webhookEmailAllowlist', operationId: 'listEmailAllowlist', tag: 'Webhooks' },
  { method: 'POST', path: '/webhooks/:id/email-allowlist', field: 'Mutation.addEmailAllowlistEntry', status: 201, operationId: 'addEmailAllowlistEntry', tag: 'Webhooks', errors: ['tier_required', 'already_exists'] },
  { method: 'DELETE', path: '/webhooks/:id/email-allowlist/:entryId', field: 'Mutation.deleteEmailAllowlistEntry', operationId: 'deleteEmailAllowlistEntry', tag: 'Webhooks', errors: ['tier_required'] },
  { method: 'GET', path: '/webhooks/:id/destinations', field: 'Query.webhookDestinations', operationId: 'listDestinations', tag: 'Destinations' },
  { method: 'POST', path: '/webhooks/:id/destinations', field: 'Mutation.createDestination', status: 201, operationId: 'createDestination', tag: 'Destinations', errors: ['tier_required'] },
  { method: 'PATCH', path: '/webhooks/:id/destinations/:destinationId', field: 'Mutation.updateDestination', operationId: 'updateDestination', tag: 'Destinations', errors: ['tier_required'] },
  { method: 'DELETE', path: '/webhooks/:id/destinations/:destinationId', field: 'Mutation.deleteDestination', operationId: 'deleteDestination', tag: 'Destinations', errors: ['invalid_state'] },
  { method: 'GET', path: '/webhooks/:id/routing', field: 'Query.webhookRouting', operationId: 'getRouting', tag: 'Routing' },
  { method: 'PUT', path: '/webhooks/:id/routing', field: 'Mutation.setWebhookRouting', operationId: 'setRouting', tag: 'Routing' },
  { method: 'GET', path: '/webhooks/:id/transform', field: 'Query.webhookTransform', operationId: 'getTransform', tag: 'Routing' },
  { method: 'PUT', path: '/webhooks/:id/transform', field: 'Mutation.setWebhookTransform', operationId: 'setTransform', tag: 'Routing', errors: ['tier_required', 'invalid_state'] },
  { method: 'GET', path: '/webhooks/:id/provider', field: 'Query.webhookProvider', operationId: 'getWebhookProvider', tag: 'Providers' },
  { method: 'PUT', path: '/webhooks/:id/provider', field: 'Mutation.setWebhookProvider', operationId: 'setWebhookProvider', tag: 'Providers', errors: ['tier_required'] },
  { method: 'GET', path: '/providers', field: 'Query.providers', operationId: 'listProviders', tag: 'Providers' },
  { method: 'POST', path: '/webhooks/:id/test-delivery', field: 'Mutation.testWebhookDelivery', operationId: 'testDelivery', tag: 'Routing', errors: ['invalid_state', 'automation_runs'] },

  // automations (user code in the event path)
  { method: 'GET', path: '/automations', field: 'Query.automations', operationId: 'listAutomations', tag: 'Automations', errors: ['tier_required'] },
  { method: 'POST', path: '/automations', field: 'Mutation.createAutomation', status: 201, operationId: 'createAutomation', tag: 'Automations', errors: ['tier_required', 'invalid_state', 'automation_counts'] },
  { method: 'GET', path: '/automations/:id', field: 'Query.automation', operationId: 'getAutomation', tag: 'Automations', errors: ['tier_required'] },
  { method: 'PATCH', path: '/automations/:id', field: 'Mutation.updateAutomation', operationId: 'updateAutomation', tag: 'Automations', errors: ['tier_required', 'invalid_state', 'automation_counts'] },
  { method: 'DELETE', path: '/automations/:id', field: 'Mutation.deleteAutomation', operationId: 'deleteAutomation', tag: 'Automations', errors: ['tier_required', 'invalid_state'] },
  { method: 'POST', path: '/automations/:id/versions', field: 'Mutation.createAutomationVersion', status: 201, operationId: 'createAutomationVersion', tag: 'Automations', errors: ['tier_required', 'invalid_state', 'automation_counts'] },
  { method: 'GET', path: '/automations/:id/versions', field: 'Query.automationVersions', operationId: 'listAutomationVersions', tag: 'Automations', errors: ['tier_required'] },
  { method: 'GET', path: '/automations/:id/runs', field: 'Query.automationRuns', operationId: 'listAutomationRuns', tag: 'Automations', errors: ['tier_required'] },
  { method: 'GET', path: '/project/egress-policy', field: 'Query.egressPolicy', operationId: 'getEgressPolicy', tag: 'Automations', errors: ['tier_required'] },
  { method: 'PUT', path: '/project/egress-policy', field: 'Mutation.setEgressPolicy', operationId: 'setEgressPolicy', tag: 'Automations', errors: ['tier_required'] },

  // schedules (the cron channel)
  { method: 'GET', path: '/webhooks/:id/schedules', field: 'Query.webhookSchedules', operationId: 'listSchedules', tag: 'Schedules', errors: ['tier_required'] },
  { method: 'POST', path: '/webhooks/:id/schedules', field: 'Mutation.createSchedule', status: 201, operationId: 'createSchedule', tag: 'Schedules', errors: ['tier_required'] },
  { method: 'GET', path: '/webhooks/:id/schedules/:scheduleId', field: 'Query.webhookSchedule', operationId: 'getSchedule', tag: 'Schedules', errors: ['tier_required'] },
  { method: 'PATCH', path: '/webhooks/:id/schedules/:scheduleId', field: 'Mutation.updateSchedule', operationId: 'updateSchedule', tag: 'Schedules', errors: ['tier_required'] },
  { method: 'DELETE', path: '/webhooks/:id/schedules/:scheduleId', field: 'Mutation.deleteSchedule', operationId: 'deleteSchedule', tag: 'Schedules', errors: ['tier_required'] },
  { method: 'POST', path: '/webhooks/:id/schedules/:scheduleId/trigger', field: 'Mutation.triggerSchedule', status: 202, operationId: 'triggerSchedule', tag: 'Schedules', errors: ['tier_required', 'ingest'] },

  // observability (CONTRACT §9)
  { method: 'GET', path: '/webhooks/:id/metrics', field: 'Query.webhookMetrics', operationId: 'getWebhookMetrics', tag: 'Observability' },
  { method: 'GET', path: '/webhooks/:id/backlog', field: 'Query.webhookBacklog', operationId: 'getWebhookBacklog', tag: 'Observability' },
  { method: 'GET', path: '/project/drains', field: 'Query.drains', operationId: 'listDrains', tag: 'Observability', errors: ['tier_required'] },
  { method: 'POST', path: '/project/drains', field: 'Mutation.createDrain', status: 201, operationId: 'createDrain', tag: 'Observability', errors: ['tier_required', 'drain_quota'] },
  { method: 'GET', path: '/project/drains/:id', field: 'Query.drain', operationId: 'getDrain', tag: 'Observability', errors: ['tier_required'] },
  { method: 'PATCH', path: '/project/drains/:id', field: 'Mutation.updateDrain', operationId: 'updateDrain', tag: 'Observability', errors: ['tier_required'] },
  { method: 'DELETE', path: '/project/drains/:id', field: 'Mutation.deleteDrain', operationId: 'deleteDrain', tag: 'Observability', errors: ['tier_required'] },
  { method: 'GET', path: '/project/alert-rules', field: 'Query.alertRules', operationId: 'listAlertRules', tag: 'Observability', errors: ['tier_required'] },
  { method: 'POST', path: '/project/alert-rules', field: 'Mutation.createAlertRule', status: 201, operationId: 'createAlertRule', tag: 'Observability', errors: ['tier_required'] },
  { method: 'GET', path: '/project/alert-rules/:id', field: 'Query.alertRule', operationId: 'getAlertRule', tag: 'Observability', errors: ['tier_required'] },
  { method: 'PATCH', path: '/project/alert-rules/:id', field: 'Mutation.updateAlertRule', operationId: 'updateAlertRule', tag: 'Observability', errors: ['tier_required'] },
  { method: 'DELETE', path: '/project/alert-rules/:id', field: 'Mutation.deleteAlertRule', operationId: 'deleteAlertRule', tag: 'Observability', errors: ['tier_required'] },
  { method: 'GET', path: '/project/alert-dispatches', field: 'Query.alertDispatches', operationId: 'listAlertDispatches', tag: 'Observability', errors: ['tier_required'] },
  { method: 'POST', path: '/project/drains/:id/rotate-secret', field: 'Mutation.rotateDrainSecret', operationId: 'rotateDrainSecret', tag: 'Observability', errors: ['tier_required'] },

  // deliveries, replay, DLQ
  { method: 'GET', path: '/deliveries', field: 'Query.deliveries', operationId: 'listDeliveries', tag: 'Deliveries' },
  { method: 'GET', path: '/deliveries/:id', field: 'Query.delivery', operationId: 'getDelivery', tag: 'Deliveries' },
  { method: 'GET', path: '/deliveries/:id/attempts', field: 'Query.deliveryAttempts', operationId: 'listDeliveryAttempts', tag: 'Deliveries' },
  { method: 'POST', path: '/deliveries/:id/replay', field: 'Mutation.replayDelivery', status: 202, operationId: 'replayDelivery', tag: 'Deliveries', errors: ['payload_gone', 'replay_quotas'] },
  { method: 'GET', path: '/deliveries/:id/replay-jobs', field: 'Query.deliveryReplayJobs', operationId: 'listDeliveryReplayJobs', tag: 'Deliveries' },
  { method: 'GET', path: '/webhooks/:id/deliveries', field: 'Query.webhookDeliveries', operationId: 'listWebhookDeliveries', tag: 'Deliveries' },
  { method: 'POST', path: '/replay-jobs', field: 'Mutation.createReplayJob', status: 202, operationId: 'createReplayJob', tag: 'Deliveries', errors: ['tier_required'] },
  { method: 'GET', path: '/dlq', field: 'Query.dlq', operationId: 'listDlq', tag: 'DLQ' },
  { method: 'GET', path: '/dlq/export', field: 'Query.dlqExport', operationId: 'exportDlq', tag: 'DLQ', pageSize: DLQ_EXPORT_PAGE_SIZE },
  { method: 'POST', path: '/dlq/redrive', field: 'Mutation.redriveDlq', status: 202, operationId: 'redriveDlq', tag: 'DLQ', errors: ['tier_required'] },
  { method: 'POST', path: '/dlq/:id/redrive', field: 'Mutation.redriveDlqEntry', status: 202, operationId: 'redriveDlqEntry', tag: 'DLQ', errors: ['invalid_state', 'payload_gone', 'replay_quotas'] },

  // files of form and email events (their bytes: BYTES_ROUTES)
  { method: 'GET', path: '/files/:id/metadata', field: 'Query.fileMetadata', operationId: 'getFileMetadata', tag: 'Files' },
  { method: 'GET', path: '/events/:eventId/files', field: 'Query.eventFiles', operationId: 'listEventFiles', tag: 'Files' },

  // conversations (spec/conversation-service.md): Stripe-style, every success is 200
  { method: 'GET', path: '/contacts', field: 'Query.contacts', operationId: 'listContacts', tag: 'Contacts' },
  { method: 'POST', path: '/contacts', field: 'Mutation.createContact', operationId: 'createContact', tag: 'Contacts', form: true },
  { method: 'GET', path: '/contacts/:id', field: 'Query.contact', operationId: 'getContact', tag: 'Contacts' },
  { method: 'PUT', path: '/contacts/:id', field: 'Mutation.updateContact', operationId: 'updateContact', tag: 'Contacts', form: true },
  { method: 'DELETE', path: '/contacts/:id', field: 'Mutation.deleteContact', operationId: 'deleteContact', tag: 'Contacts' },
  { method: 'GET', path: '/messages', field: 'Query.messages', operationId: 'listMessages', tag: 'Messages' },
  { method: 'POST', path: '/messages', field: 'Mutation.sendMessage', operationId: 'sendMessage', tag: 'Messages', form: true, errors: ['not_found'] },
  { method: 'GET', path: '/messages/:id', field: 'Query.message', operationId: 'getMessage', tag: 'Messages' },
  { method: 'PUT', path: '/messages/:id', field: 'Mutation.updateMessage', operationId: 'updateMessage', tag: 'Messages', form: true },
  { method: 'DELETE', path: '/messages/:id', field: 'Mutation.deleteMessage', operationId: 'deleteMessage', tag: 'Messages' },
];

/**
 * `/v1` routes that answer bytes, not JSON, so no GraphQL field (and no SOFA) serves them: a plain
 * handler in src/http/ does, after the same API-key check. Documented by hand in the OpenAPI
 * document (src/http/openapi.ts, bytesOperation).
 */
export interface BytesRoute {
  method: 'GET';
  path: string;
  operationId: string;
  tag: RestTag;
  summary: string;
  description: string;
}

export const BYTES_ROUTES: BytesRoute[] = [
  {
    method: 'GET',
    path: '/files/:id',
    operationId: 'getFileContent',
    tag: 'Files',
    summary: "A stored file's bytes",
    description:
      "The content of a file of a form post or an email, with its content type and `content-disposition: attachment`, while payload retention keeps it; after that 410 `payload_gone`. 404 for another project's file.",
  },
];
