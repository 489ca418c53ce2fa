import { defaultFieldResolver, type GraphQLSchema } from 'graphql';
import { log } from '../log.ts';
import { recordAudit } from '../projects/audit.ts';
import type { GraphQLContext } from '../graphql/builder.ts';

/**
 * Management writes recorded in the audit log, by mutation: the action and target type.
 * (Project, API key and quota-override writes record themselves in their services.)
 */
const AUDITED: Record<string, [action: string, targetType: string]> = {
  createWebhook: ['webhook.created', 'webhook'],
  updateWebhook: ['webhook.updated', 'webhook'],
  pauseWebhook: ['webhook.paused', 'webhook'],
  resumeWebhook: ['webhook.resumed', 'webhook'],
  archiveWebhook: ['webhook.archived', 'webhook'],
  restoreWebhook: ['webhook.restored', 'webhook'],
  destroyWebhook: ['webhook.destroyed', 'webhook'],
  rotateIngestSecret: ['webhook.ingest_secret_rotated', 'webhook'],
  rotateSigningSecret: ['webhook.signing_secret_rotated', 'webhook'],
  setWebhookRouting: ['webhook.routing_updated', 'webhook'],
  setWebhookTransform: ['webhook.transform_updated', 'webhook'],
  setWebhookProvider: ['webhook.provider_updated', 'webhook'],
  createDestination: ['destination.created', 'destination'],
  updateDestination: ['destination.updated', 'destination'],
  deleteDestination: ['destination.deleted', 'destination'],
  createSchedule: ['schedule.created', 'schedule'],
  updateSchedule: ['schedule.updated', 'schedule'],
  deleteSchedule: ['schedule.deleted', 'schedule'],
  triggerSchedule: ['schedule.triggered', 'schedule'],
  replayDelivery: ['delivery.replayed', 'delivery'],
  createReplayJob: ['replay_job.created', 'replay_job'],
  redriveDlqEntry: ['dlq_entry.redriven', 'dlq_entry'],
  redriveDlq: ['dlq.redriven', 'replay_job'],
};

const SECRET_KEY = /secret|credential|password|token|private/i;

function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) ? '[redacted]' : redact(v, depth + 1)]));
}

/**
 * Wraps the audited mutations' resolvers so every successful write — over GraphQL or REST,
 * which both run these resolvers — leaves an audit row naming the API key that made it.
 */
export function withAuditedMutations(schema: GraphQLSchema): GraphQLSchema {
  const fields = schema.getMutationType()?.getFields() ?? {};
  for (const [name, [action, targetType]] of Object.entries(AUDITED)) {
    const field = fields[name];
    if (!field) throw new Error(`audited mutation ${name} is not in the schema`);
    const resolve = field.resolve ?? defaultFieldResolver;
    field.resolve = async (root, args, ctx: GraphQLContext, info) => {
      const result = await resolve(root, args, ctx, info);
      const r = result as { id?: string } | null;
      const targetId = targetType === 'destination' ? (args.destinationId ?? r?.id) : targetType === 'schedule' ? (args.scheduleId ?? r?.id) : targetType === 'delivery' || targetType === 'dlq_entry' ? args.id : (r?.id ?? args.id);
      try {
        await recordAudit(ctx.rt.db.pool, { projectId: ctx.auth.projectId, actor: ctx.auth.apiKeyId, action, targetType, targetId: targetId ?? null, data: { args: redact(args) as object } });
      } catch (err) {
        log.error({ err, action }, 'audit log write failed');
      }
      return result;
    };
  }
  return schema;
}
