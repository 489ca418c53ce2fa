// Prisma's CLI wants its native schema engine for every command, even `generate`,
// which does not use it. The engine cannot be downloaded on machines without access
// to Prisma's binary host, so point it at an existing executable for generation only.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

if (!existsSync('prisma/schema.prisma')) process.exit(0);
const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
const r = spawnSync('npx', ['prisma', 'generate'], { stdio: 'inherit', env });
process.exit(r.status ?? 1);
