// Writes prisma/migrations/<timestamp>_<name>/migration.sql: the SQL from the schema as of
// the last migration (prisma/migrations/schema.snapshot.prisma) to prisma/schema.prisma.
//   npm run db:migration -- <name>
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { diffSchemas, schemaSide } from './schema-diff.ts';
import { withDatabase } from './with-database.ts';

const name = (process.argv[2] ?? '').replace(/[^a-z0-9_]/gi, '_');
if (!name) {
  console.error('usage: npm run db:migration -- <name>');
  process.exit(2);
}
const snapshotPath = 'prisma/migrations/schema.snapshot.prisma';
const schema = await readFile('prisma/schema.prisma', 'utf8');
const from = existsSync(snapshotPath)
  ? schemaSide('schema.prisma', await readFile(snapshotPath, 'utf8'))
  : ({ tag: 'empty' } as const);
const sql = await withDatabase((url) => diffSchemas(url, from, schemaSide('schema.prisma', schema)));
if (!sql.trim()) {
  console.log('schema.prisma matches the migrations; nothing to write');
  process.exit(0);
}
const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
const dir = `prisma/migrations/${stamp}_${name}`;
await mkdir(dir, { recursive: true });
await writeFile(`${dir}/migration.sql`, sql);
await writeFile(snapshotPath, schema);
if (!existsSync('prisma/migrations/migration_lock.toml')) {
  await writeFile('prisma/migrations/migration_lock.toml', 'provider = "postgresql"\n');
}
console.log(`wrote ${dir}/migration.sql`);
