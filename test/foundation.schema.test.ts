import { readFile } from 'node:fs/promises';
import { printSchema } from 'graphql';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { schema } from '../src/schema/index.ts';
import { migrate } from '../src/db/migrate.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { diffSchemas, schemaSide } from '../scripts/schema-diff.ts';
import { DASHBOARD_DESTINATION_TYPES_PATH, dashboardDestinationTypes } from '../scripts/print-schema.ts';
import { DASHBOARD_GRAPHQL_ENV_PATH, dashboardGraphqlEnv } from '../scripts/dashboard-graphql-env.ts';
import { createTestDatabase, serverUrl } from './support/database.ts';

describe('schema sources agree', () => {
  it('schema.graphql is the schema Pothos builds (run `npm run schema:print`)', async () => {
    expect(await readFile('schema.graphql', 'utf8')).toBe(printSchema(schema) + '\n');
  });

  it("the dashboard's GraphQL types are schema.graphql's (run `npm run schema:print`)", async () => {
    expect(await readFile(DASHBOARD_GRAPHQL_ENV_PATH, 'utf8')).toBe(dashboardGraphqlEnv(await readFile('schema.graphql', 'utf8')));
  });

  it("the dashboard's destination types are the destination packs (run `npm run schema:print`)", async () => {
    expect(await readFile(DASHBOARD_DESTINATION_TYPES_PATH, 'utf8')).toBe(dashboardDestinationTypes());
  });

  it('prisma/schema.prisma matches the committed migrations (run `npm run db:migration -- <name>`)', async () => {
    const url = serverUrl();
    const snapshot = await readFile('prisma/migrations/schema.snapshot.prisma', 'utf8');
    const current = await readFile('prisma/schema.prisma', 'utf8');
    // 1. No change in schema.prisma since the last migration was generated.
    expect(await diffSchemas(url, schemaSide('schema.prisma', snapshot), schemaSide('schema.prisma', current))).toBe('');
    // 2. The migrations, applied in order, build exactly what the schema describes (the history
    //    tables' partitions aside: their parents carry the schema's columns and indexes).
    const fromSchema = await createTestDatabase();
    const fromMigrations = await createTestDatabase();
    const [a, b] = [new pg.Client({ connectionString: fromSchema }), new pg.Client({ connectionString: fromMigrations })];
    await a.connect();
    await b.connect();
    try {
      for (const c of [a, b]) await c.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA IF EXISTS graphile_worker CASCADE');
      await a.query(await diffSchemas(url, { tag: 'empty' }, schemaSide('schema.prisma', current)));
      await migrate(fromMigrations, [ATTEMPT_TASK]);
      const catalog = async (c: pg.Client) =>
        (
          await c.query(`
            SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name <> '_prisma_migrations' AND NOT EXISTS (SELECT 1 FROM pg_class pc WHERE pc.relname = table_name AND pc.relnamespace = 'public'::regnamespace AND pc.relispartition)
            UNION ALL SELECT tablename, indexname, replace(indexdef, ' ON ONLY ', ' ON '), '', '' FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_prisma_migrations'
              AND NOT EXISTS (SELECT 1 FROM pg_class pc WHERE pc.relname = tablename AND pc.relnamespace = 'public'::regnamespace AND pc.relispartition)
            ORDER BY 1, 2`)
        ).rows;
      expect(await catalog(b)).toEqual(await catalog(a));
    } finally {
      await a.end();
      await b.end();
    }
  });

  it('migrations are idempotent and safe to run from several processes at once', async () => {
    const url = await createTestDatabase();
    const results = await Promise.all([migrate(url, [ATTEMPT_TASK]), migrate(url, [ATTEMPT_TASK]), migrate(url, [ATTEMPT_TASK])]);
    expect(results.flat()).toEqual([]); // the template was already migrated
  });

  it('the tables every ingest or delivery writes are never truncated by VACUUM (its exclusive lock would stall the pipeline)', async () => {
    const url = await createTestDatabase();
    await migrate(url, [ATTEMPT_TASK]);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string }>(
        // A partitioned table (the history tables, src/retention/partitions.ts) has no storage of its
        // own: it counts when every one of its partitions has the option.
        `SELECT c.oid::regclass::text AS name FROM pg_class c WHERE 'vacuum_truncate=false' = ANY (c.reloptions) AND NOT c.relispartition
         UNION ALL
         SELECT p.oid::regclass::text FROM pg_class p WHERE p.relkind = 'p'
            AND NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                             WHERE i.inhparent = p.oid AND NOT coalesce('vacuum_truncate=false' = ANY (c.reloptions), false))
         ORDER BY 1`,
      );
      expect(rows.map((r) => r.name)).toEqual(
        expect.arrayContaining([
          'events',
          'deliveries',
          'delivery_attempts',
          'usage_counters',
          'rate_limit_windows',
          'webhook_metric_buckets',
          'inbound_dedupe',
          'drain_outbox',
          'files',
          'graphile_worker._private_jobs',
          'graphile_worker._private_job_queues',
        ]),
      );
    } finally {
      await client.end();
    }
  });
});
