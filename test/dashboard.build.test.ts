// The dashboard's browser code typechecks (it is outside the root tsconfig: its own, with DOM
// and Preact's JSX), and the build that `npm install` made is the one the server serves.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('dashboard sources', () => {
  it('typecheck (npm run dashboard:typecheck)', () => {
    const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '--noEmit', '-p', 'dashboard'], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  }, 120_000);

  it('are built into the shell the server fills in (CSRF token placeholder, hashed entry)', () => {
    expect(existsSync('dashboard/dist/index.html'), 'npm install builds the dashboard').toBe(true);
    const html = readFileSync('dashboard/dist/index.html', 'utf8');
    expect(html).toContain('__CSRF_TOKEN__');
    expect(html).toMatch(/src="\/dashboard\/assets\/index-[\w-]+\.js"/);
  });
});
