import path from 'node:path';
import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1');

const TIERS = ['free', 'starter', 'pro', 'business', 'enterprise'] as const;

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_URL: z.string().url().optional(),
  DATABASE_URL: z.string().optional(),
  /**
   * The PostgreSQL server itself when DATABASE_URL goes through a transaction pooler (PgBouncer in
   * transaction mode): migrations, LISTEN/NOTIFY, session-level advisory locks and the job runners
   * connect here. Unset: DATABASE_URL is the server.
   */
  DATABASE_DIRECT_URL: z.string().optional(),
  DATA_DIR: z.string().default('./.data'),
  SMTP_PORT: z.coerce.number().int().min(0).max(65535).default(2525),
  EMAIL_DOMAIN: z.string().default('ingest.localhost'),
  /** STARTTLS on the SMTP server: PEM files of the certificate (chain) and its key; both or neither. */
  SMTP_TLS_CERT: z.string().optional(),
  SMTP_TLS_KEY: z.string().optional(),
  /** An SMTP client idle this long (a stalled DATA included) is disconnected; nothing of its message is kept. */
  SMTP_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600_000).default(60_000),
  /** File content (form and email files) goes to this S3 bucket when set, else to DATA_DIR/files. */
  FILES_S3_BUCKET: z.string().min(3).optional(),
  /** An S3-compatible endpoint (MinIO, R2, …); unset: AWS itself. */
  FILES_S3_ENDPOINT: z.string().url().optional(),
  FILES_S3_REGION: z.string().default('us-east-1'),
  /** Unset: the AWS SDK's default credential chain. */
  FILES_S3_ACCESS_KEY_ID: z.string().optional(),
  FILES_S3_SECRET_ACCESS_KEY: z.string().optional(),
  /** Path-style addressing (most S3-compatible servers need it). */
  FILES_S3_FORCE_PATH_STYLE: bool,
  /** A key prefix for every object (e.g. `relay/`). */
  FILES_S3_PREFIX: z.string().default(''),
  SECRETS_KEY: z
    .string()
    .optional()
    .refine((v) => v === undefined || Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded'),
  DEFAULT_TIER: z.enum(TIERS).default('free'),
  ALLOW_PRIVATE_DESTINATIONS: bool,
  /** SQS/EventBridge destinations without credentials use this process's AWS credentials (default chain). */
  ALLOW_AMBIENT_CLOUD_CREDENTIALS: bool,
  LOG_TO_STDERR: bool,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(500).default(32),
  /** How often an idle runner looks for due jobs (scheduled retries, throttle slots, deliver-at). */
  /**
   * How long a runner gathers finished jobs before marking them complete in one statement
   * (graphile-worker's completeJobBatchDelay); -1 completes each job on its own. A delivery's
   * state lives in its own row, so a job that runs again after a crash finds it done.
   */
  WORKER_COMPLETE_BATCH_MS: z.coerce.number().int().min(-1).max(1000).default(5),
  /**
   * How long an event of a busy webhook waits for others to share its ingest statement
   * (src/ingest/store-batch.ts): only when another connection sent the webhook an event less than
   * twice this long before, so a webhook that is not busy, or one producer's requests one after
   * another, never wait. 0: events share a statement only when they arrive while one is on its way.
   */
  INGEST_BATCH_WAIT_MS: z.coerce.number().int().min(0).max(100).default(5),
  WORKER_POLL_INTERVAL_MS: z.coerce.number().int().min(20).max(60_000).default(100),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(20),
  /**
   * Connections each pool of the process opens at start and keeps (default: DATABASE_POOL_SIZE, a
   * fixed-size pool; 0: opened on demand). A pool that grows under a sudden load makes PostgreSQL
   * start a backend per connection just when it is busiest: at 400 events/s that stalled ingest
   * for half a second.
   */
  DATABASE_POOL_MIN: z.coerce.number().int().min(0).max(200).optional(),
  /** How long a stop waits for in-flight requests; the whole stop is bounded at this + 3.5 s (serveUntilSignal). */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(4_000),
  CURSOR_SECRET: z.string().optional(),
  /** `off`: no quota check refuses anything (single-tenant self-hosting, benchmarking); usage is still counted. */
  QUOTA_ENFORCEMENT: z.enum(['on', 'off']).default('on'),
  /** `false`: this deployment runs no Automations (create and use answer 409 invalid_state; pinned deliveries fail). */
  AUTOMATIONS_ENABLED: z
    .enum(['true', 'false', '1', '0', ''])
    .optional()
    .transform((v) => v === undefined || v === '' || v === 'true' || v === '1'),
  /** Worker threads of each process's Automations sandbox (QuickJS): how many runs execute at once per process. */
  AUTOMATION_SANDBOX_WORKERS: z.coerce.number().int().min(1).max(32).default(2),
  /** `off`: job runners write no metrics roll-ups of results (benchmarking their cost; the metrics and alerts then miss them). */
  METRICS_ROLLUPS: z.enum(['on', 'off']).default('on'),
  /** Set: `GET /metrics` serves Prometheus text to `Authorization: Bearer <METRICS_TOKEN>` (404 otherwise). */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Worker-only processes (`npm run start:worker`) serve `/metrics` on this port (with METRICS_TOKEN). */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Set (e.g. http://127.0.0.1:4318): ingest, job and delivery attempt spans go to this OpenTelemetry collector over OTLP/HTTP (its /v1/traces). Unset: no tracing, at no cost. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  /** The `service.name` of the spans. */
  OTEL_SERVICE_NAME: z.string().min(1).default('relay-service'),
  /** Events an event drain's outbox keeps while its endpoint fails; past it, the oldest are dropped (and counted). */
  DRAIN_OUTBOX_LIMIT: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  /** A failing drain is retried with exponential backoff from DRAIN_RETRY_BASE_MS up to DRAIN_RETRY_MAX_MS. */
  DRAIN_RETRY_BASE_MS: z.coerce.number().int().min(10).max(3_600_000).default(1_000),
  DRAIN_RETRY_MAX_MS: z.coerce.number().int().min(10).max(3_600_000).default(300_000),
  /** How long one drain request may take. */
  DRAIN_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
  /** How often alert rules are evaluated (at most every 30 s by default). */
  ALERT_EVAL_INTERVAL_MS: z.coerce.number().int().min(100).max(30_000).default(30_000),
  /** SMTP server for email alert channels, e.g. smtp://user:pass@mail.example.com:587 (unset: email channels fail, recorded). */
  ALERT_SMTP_URL: z.string().url().optional(),
  ALERT_EMAIL_FROM: z.string().default('alerts@relay.localhost'),
  /** Tries per alert webhook channel (with backoff from 500 ms). */
  ALERT_WEBHOOK_TRIES: z.coerce.number().int().min(1).max(10).default(3),
});

export type Config = z.infer<typeof schema> & { publicUrl: string; dataDir: string };

/** Reads and validates the environment once; prints every problem and exits on bad input. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) console.error(`config: ${issue.path.join('.')}: ${issue.message}`);
    process.exit(1);
  }
  const c = parsed.data;
  return {
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    publicUrl: (c.PUBLIC_URL ?? `http://localhost:${c.PORT}`).replace(/\/$/, ''),
  };
}

export const config: Config = loadConfig();
export { TIERS };
export type Tier = (typeof TIERS)[number];

/** The environment a child program of the service (PostgreSQL's initdb and postgres) starts with: this process's, plus `extra`. */
export function childEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...extra };
}
