// Every test file: its databases are dropped after it (after its own afterAll hooks, which run
// first: vitest runs after-hooks in the reverse order of their registration).
import { afterAll } from 'vitest';
import { dropTestDatabases } from './database.ts';

afterAll(dropTestDatabases, 60_000);
