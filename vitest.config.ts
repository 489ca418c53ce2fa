import { defineConfig } from 'vitest/config';

import { createRequire } from 'node:module';
import { TEST_ENV } from './test/support/test-env.ts';

const require = createRequire(import.meta.url);

// Tests that start real service processes (`*.process.test.ts`) or bound wall-clock time
// (`*.timing.test.ts`): a project of their own, run after the suite, one file at a time.
const ALONE = ['test/**/*.process.test.ts', 'test/**/*.timing.test.ts'];

export default defineConfig({
  // One copy of graphql for everything: vite would otherwise mix its ESM and CJS builds.
  resolve: { alias: { graphql: require.resolve('graphql') } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    env: TEST_ENV,
    setupFiles: ['./test/support/drop-databases.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          globalSetup: ['./test/support/global-setup.ts'],
          include: ['test/**/*.test.ts'],
          exclude: ALONE,
          maxWorkers: 3,
          // A worker runs its files one after another in one module graph, instead of loading the
          // service's ~1,600 modules again for each file (2-2.5 s each: 250 s of the suite's CPU
          // on 2 cores). Each file still starts and stops its own app on a database of its own;
          // what a file changes in process-wide state (env, spies, timers) it puts back itself.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'alone',
          globalSetup: ['./test/support/global-setup.ts'],
          include: ALONE,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
