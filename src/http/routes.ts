/**
 * The REST surface: every `/v1` route, the GraphQL field SOFA maps it to, its method
 * and its success status. One table; nothing else defines REST routes.
 */
export interface RestRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Relative to /v1, with `:name` path parameters matching field arguments. */
  path: string;
  /** `Query.name` or `Mutation.name`. */
  field: string;
  status?: 200 | 201 | 202;
}

export const REST_ROUTES: RestRoute[] = [
  // projects
  { method: 'GET', path: '/project', field: 'Query.project' },
  { method: 'PATCH', path: '/project', field: 'Mutation.updateProject' },
  { method: 'GET', path: '/usage', field: 'Query.usage' },
  { method: 'GET', path: '/project/api-keys', field: 'Query.apiKeys' },
  { method: 'POST', path: '/project/api-keys', field: 'Mutation.createApiKey', status: 201 },
  { method: 'POST', path: '/project/api-keys/:id/revoke', field: 'Mutation.revokeApiKey' },
  { method: 'GET', path: '/project/audit-logs', field: 'Query.auditLogs' },
  { method: 'GET', path: '/webhooks/:id/quota-overrides', field: 'Query.webhookQuotaOverrides' },
  { method: 'PUT', path: '/webhooks/:id/quota-overrides', field: 'Mutation.setWebhookQuotaOverrides' },

  // webhooks
  { method: 'GET', path: '/webhooks', field: 'Query.webhooks' },
  { method: 'POST', path: '/webhooks', field: 'Mutation.createWebhook', status: 201 },
  { method: 'GET', path: '/webhooks/:id', field: 'Query.webhook' },
  { method: 'PATCH', path: '/webhooks/:id', field: 'Mutation.updateWebhook' },
  { method: 'POST', path: '/webhooks/:id/pause', field: 'Mutation.pauseWebhook' },
  { method: 'POST', path: '/webhooks/:id/resume', field: 'Mutation.resumeWebhook' },
  { method: 'POST', path: '/webhooks/:id/archive', field: 'Mutation.archiveWebhook' },
  { method: 'POST', path: '/webhooks/:id/restore', field: 'Mutation.restoreWebhook' },
  { method: 'POST', path: '/webhooks/:id/destroy', field: 'Mutation.destroyWebhook' },
  { method: 'POST', path: '/webhooks/:id/rotate-ingest-secret', field: 'Mutation.rotateIngestSecret' },
  { method: 'POST', path: '/webhooks/:id/rotate-signing-secret', field: 'Mutation.rotateSigningSecret' },
  { method: 'GET', path: '/webhooks/:id/secrets', field: 'Query.webhookSecrets' },
  { method: 'GET', path: '/webhooks/:id/destinations', field: 'Query.webhookDestinations' },
  { method: 'POST', path: '/webhooks/:id/destinations', field: 'Mutation.createDestination', status: 201 },
  { method: 'PATCH', path: '/webhooks/:id/destinations/:destinationId', field: 'Mutation.updateDestination' },
  { method: 'DELETE', path: '/webhooks/:id/destinations/:destinationId', field: 'Mutation.deleteDestination' },
  { method: 'GET', path: '/webhooks/:id/routing', field: 'Query.webhookRouting' },
  { method: 'PUT', path: '/webhooks/:id/routing', field: 'Mutation.setWebhookRouting' },
  { method: 'GET', path: '/webhooks/:id/transform', field: 'Query.webhookTransform' },
  { method: 'PUT', path: '/webhooks/:id/transform', field: 'Mutation.setWebhookTransform' },
  { method: 'POST', path: '/webhooks/:id/test-delivery', field: 'Mutation.testWebhookDelivery' },

  // deliveries, replay, DLQ
  { method: 'GET', path: '/deliveries', field: 'Query.deliveries' },
  { method: 'GET', path: '/deliveries/:id', field: 'Query.delivery' },
  { method: 'GET', path: '/deliveries/:id/attempts', field: 'Query.deliveryAttempts' },
  { method: 'POST', path: '/deliveries/:id/replay', field: 'Mutation.replayDelivery', status: 202 },
  { method: 'GET', path: '/deliveries/:id/replay-jobs', field: 'Query.deliveryReplayJobs' },
  { method: 'GET', path: '/webhooks/:id/deliveries', field: 'Query.webhookDeliveries' },
  { method: 'POST', path: '/replay-jobs', field: 'Mutation.createReplayJob', status: 202 },
  { method: 'GET', path: '/dlq', field: 'Query.dlq' },
  { method: 'GET', path: '/dlq/export', field: 'Query.dlqExport' },
  { method: 'POST', path: '/dlq/redrive', field: 'Mutation.redriveDlq', status: 202 },
  { method: 'POST', path: '/dlq/:id/redrive', field: 'Mutation.redriveDlqEntry', status: 202 },

  // conversations (spec/conversation-service.md): Stripe-style, every success is 200
  { method: 'GET', path: '/contacts', field: 'Query.contacts' },
  { method: 'POST', path: '/contacts', field: 'Mutation.createContact' },
  { method: 'GET', path: '/contacts/:id', field: 'Query.contact' },
  { method: 'PUT', path: '/contacts/:id', field: 'Mutation.updateContact' },
  { method: 'DELETE', path: '/contacts/:id', field: 'Mutation.deleteContact' },
  { method: 'GET', path: '/messages', field: 'Query.messages' },
  { method: 'POST', path: '/messages', field: 'Mutation.sendMessage' },
  { method: 'GET', path: '/messages/:id', field: 'Query.message' },
  { method: 'PUT', path: '/messages/:id', field: 'Mutation.updateMessage' },
  { method: 'DELETE', path: '/messages/:id', field: 'Mutation.deleteMessage' },
];
