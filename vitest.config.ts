import { defineConfig } from 'vitest/config';

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export default defineConfig({
  // One copy of graphql for everything: vite would otherwise mix its ESM and CJS builds.
  resolve: { alias: { graphql: require.resolve('graphql') } },
  test: {
    globalSetup: ['./test/support/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 3,
    env: {
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      ALLOW_PRIVATE_DESTINATIONS: 'true',
      SECRETS_KEY: 'dGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcy1sb25nISE=',
      DATA_DIR: '.tmp/test-data',
      EMAIL_DOMAIN: 'ingest.test',
      // Every service a test starts (in process or as npm start) takes a free SMTP port, not 2525.
      SMTP_PORT: '0',
      PUBLIC_URL: 'http://127.0.0.1:3000',
      // Pools opened on demand: three test files at once each start several services on one
      // cluster, whose fixed-size pools (the default) would need hundreds of connections.
      DATABASE_POOL_MIN: '0',
    },
  },
});
