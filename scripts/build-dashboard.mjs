// Builds the dashboard (dashboard/ -> dashboard/dist) with Vite. Run by `postinstall`, so
// `npm install` / `npm ci` leave a servable dashboard; the output is never committed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

if (!existsSync('dashboard/vite.config.ts')) process.exit(0);
const r = spawnSync(process.execPath, ['node_modules/vite/bin/vite.js', 'build', '--config', 'dashboard/vite.config.ts'], { stdio: 'inherit' });
if (r.status !== 0) console.error('dashboard build failed: /dashboard answers 503 until `npm run dashboard:build` succeeds');
process.exit(r.status ?? 1);
