// SQL diff between two Prisma schemas with Prisma's schema engine compiled to
// WebAssembly: the native engine cannot be downloaded on every machine, this can.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { PrismaPg } from '@prisma/adapter-pg';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';

type Side = { tag: 'empty' } | { tag: 'schemaDatamodel'; files: { path: string; content: string }[] };

export function schemaSide(path: string, content: string): Side {
  return { tag: 'schemaDatamodel', files: [{ path, content }] };
}

let enginePromise: Promise<any> | undefined;

async function loadEngine(connectionString: string) {
  const require = createRequire(import.meta.url);
  const bg: any = await import('@prisma/schema-engine-wasm/schema_engine_bg');
  const wasmPath = require.resolve('@prisma/schema-engine-wasm').replace(/schema_engine\.js$/, 'schema_engine_bg.wasm');
  const { instance } = await WebAssembly.instantiate(await readFile(wasmPath), { './schema_engine_bg.js': bg });
  bg.__wbg_set_wasm(instance.exports);
  (instance.exports as any).__wbindgen_start?.();
  // The engine connects on creation even though a schema-to-schema diff reads no tables.
  const adapter = bindMigrationAwareSqlAdapterFactory(new PrismaPg({ connectionString }));
  return bg.SchemaEngine.new({ datamodels: undefined }, () => {}, adapter);
}

/** SQL that takes a database from `from` to `to`; empty when they agree. */
export async function diffSchemas(connectionString: string, from: Side, to: Side): Promise<string> {
  enginePromise ??= loadEngine(connectionString);
  const engine = await enginePromise;
  const result = await engine.diff({ from, to, script: true, exitCode: null, filters: { externalTables: [], externalEnums: [] } });
  const sql: string = result.stdout ?? '';
  return sql.includes('-- This is an empty migration.') ? '' : sql;
}
