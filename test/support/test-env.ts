// The settings every test file runs with (vitest.config.ts's `test.env`). They are the test run's,
// not a service's defaults: processes that a test starts as `npm start` would have them get
// `serviceEnv()` (test/support/processes.ts), which leaves them out.
export const TEST_ENV = {
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
  ALLOW_PRIVATE_DESTINATIONS: 'true',
  SECRETS_KEY: 'dGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcy1sb25nISE=',
  DATA_DIR: '.tmp/test-data',
  EMAIL_DOMAIN: 'ingest.test',
  // Every service a test starts in process takes a free SMTP port, not 2525.
  SMTP_PORT: '0',
  PUBLIC_URL: 'http://127.0.0.1:3000',
  // Pools opened on demand: three test files at once each start several services on one
  // cluster, whose fixed-size pools (the default) would need hundreds of connections.
  DATABASE_POOL_MIN: '0',
};

/** What vitest itself puts in a test's environment (import.meta.env and its own markers). */
const VITEST_ENV = /^(VITEST(_.*)?|TEST|PROD|DEV|SSR|BASE_URL|MODE|FORCE_TTY)$/;

/**
 * This process's environment less the test run's settings: what a shell that runs `npm start`
 * has. `env` is set on top (what the test means to set: DATABASE_URL, PORT, DATA_DIR…).
 */
export function serviceEnv(env: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k in TEST_ENV || VITEST_ENV.test(k)) continue;
    // vitest sets NODE_ENV=test when it was not set.
    if (k === 'NODE_ENV' && v === 'test') continue;
    out[k] = v;
  }
  return { ...out, ...env };
}
