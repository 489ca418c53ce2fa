// CONTRACT §11 over HTTP: the CLI's users, sign-in and its limits, session cookies, CSRF on
// /graphql (HTTP and graphql-ws), sign-out, idle expiry, security headers, the served build.
import { existsSync } from 'node:fs';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { LOGIN_LIMITS } from '../src/users/service.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { runCli } from './support/processes.ts';

let app: TestApp;
let projectId: string;
let apiKey: string;
const password = 'correct horse battery';

beforeAll(async () => {
  app = await startTestApp();
  ({ projectId, apiKey } = await app.project('free'));
});
afterAll(async () => {
  await app?.stop();
});

function form(fields: Record<string, string>) {
  return { method: 'POST', redirect: 'manual' as const, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() };
}

async function signIn(email: string, pass = password, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.url}/dashboard/login`, { ...form({ email, password: pass }), headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } });
  const setCookie = res.headers.get('set-cookie') ?? '';
  const cookie = /relay_session=[^;]+/.exec(setCookie)?.[0];
  return { res, setCookie, cookie, text: await res.text() };
}

async function csrfOf(cookie: string) {
  const page = await fetch(`${app.url}/dashboard`, { headers: { cookie }, redirect: 'manual' });
  expect(page.status).toBe(200);
  return /<meta name="csrf-token" content="([^"]+)"/.exec(await page.text())![1];
}

async function createUser(email: string) {
  const { createUser } = await import('../src/users/service.ts');
  await createUser(app.rt, { email, projectId, password });
}

describe('user create (admin CLI)', () => {
  it('prints one JSON object with a generated password, which signs in; the hash is scrypt, never the password', async () => {
    const cli = await runCli({ DATABASE_URL: app.databaseUrl }, ['user', 'create', '--email', 'Ops@Example.com', '--project', projectId]);
    expect(cli.code, cli.output).toBe(0);
    const out = JSON.parse(cli.stdout.trim());
    expect(out.user).toMatchObject({ email: 'ops@example.com', projectId, id: expect.stringMatching(/^usr_/) });
    expect(out.password).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    const row = await app.rt.db.prisma.dashboardUser.findUniqueOrThrow({ where: { email: 'ops@example.com' } });
    expect(row.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(row.passwordHash).not.toContain(out.password);
    const { res } = await signIn('ops@example.com', out.password);
    expect(res.status).toBe(303);

    const given = await runCli({ DATABASE_URL: app.databaseUrl }, ['user', 'create', '--email', 'given@example.com', '--project', projectId, '--password', 'a-password-of-mine']);
    expect(given.code, given.output).toBe(0);
    expect(JSON.parse(given.stdout.trim()).password).toBeUndefined();
    expect((await signIn('given@example.com', 'a-password-of-mine')).res.status).toBe(303);

    const unknownProject = await runCli({ DATABASE_URL: app.databaseUrl }, ['user', 'create', '--email', 'x@example.com', '--project', 'prj_nope']);
    expect(unknownProject.code).toBe(1);
  }, 120_000);
});

describe('sign-in, session cookie, sign-out', () => {
  it('sets an HttpOnly SameSite=Lax cookie and redirects with 303; wrong credentials are 401 with the form again', async () => {
    await createUser('ana@example.com');
    const ok = await signIn('ana@example.com');
    expect(ok.res.status).toBe(303);
    expect(ok.res.headers.get('location')).toBe('/dashboard');
    expect(ok.setCookie).toMatch(/HttpOnly/i);
    expect(ok.setCookie).toMatch(/SameSite=Lax/i);
    expect(ok.setCookie).toMatch(/Path=\//);
    expect(ok.setCookie).not.toMatch(/Secure/i); // PUBLIC_URL is http in tests

    const wrong = await signIn('ana@example.com', 'not the password');
    expect(wrong.res.status).toBe(401);
    expect(wrong.cookie).toBeUndefined();
    expect(wrong.text).toContain('Wrong email or password.');
    expect(wrong.text).toContain('<form method="post" action="/dashboard/login"');
    const unknown = await signIn('nobody@example.com');
    expect(unknown.res.status).toBe(401);
    expect((await signIn(`${'a'.repeat(400)}@example.com`)).res.status).toBe(401);
    // Not a form: the contract's error body.
    const json = await fetch(`${app.url}/dashboard/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'ana@example.com', password }) });
    expect(json.status).toBe(400);
    expect((await json.json()).error).toMatchObject({ code: 'invalid_request', param: 'content-type' });

    // Signed in: the shell, with the CSRF token and the security headers; signed out: the sign-in page.
    const shell = await fetch(`${app.url}/dashboard/webhooks`, { headers: { cookie: ok.cookie! }, redirect: 'manual' });
    expect(shell.status).toBe(200);
    const csp = shell.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(shell.headers.get('x-content-type-options')).toBe('nosniff');
    expect(shell.headers.get('referrer-policy')).toBeTruthy();
    expect(shell.headers.get('cache-control')).toBe('no-store');
    const html = await shell.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    const anonymous = await fetch(`${app.url}/dashboard`, { redirect: 'manual' });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toBe('/dashboard/login');

    // Sign-out needs the CSRF token; then the cookie is cleared and the session is over.
    const csrf = await csrfOf(ok.cookie!);
    const refused = await fetch(`${app.url}/dashboard/logout`, { ...form({}), headers: { cookie: ok.cookie!, 'content-type': 'application/x-www-form-urlencoded' } });
    expect(refused.status).toBe(403);
    const out = await fetch(`${app.url}/dashboard/logout`, { ...form({ csrf }), headers: { cookie: ok.cookie!, 'content-type': 'application/x-www-form-urlencoded' } });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/relay_session=;.*Max-Age=0/i);
    const after = await fetch(`${app.url}/dashboard`, { headers: { cookie: ok.cookie! }, redirect: 'manual' });
    expect(after.status).toBe(303);
  });

  it('sets Secure when PUBLIC_URL is https', async () => {
    const secureApp = await startTestApp({ databaseUrl: app.databaseUrl, config: { PUBLIC_URL: 'https://relay.example.com', publicUrl: 'https://relay.example.com' } as never });
    try {
      await createUser('secure@example.com');
      const res = await fetch(`${secureApp.url}/dashboard/login`, form({ email: 'secure@example.com', password }));
      expect(res.status).toBe(303);
      expect(res.headers.get('set-cookie')).toMatch(/;\s*Secure/i);
    } finally {
      await secureApp.stop();
    }
  });

  it('ends a session idle for 12 hours', async () => {
    await createUser('idle@example.com');
    const { cookie } = await signIn('idle@example.com');
    expect((await fetch(`${app.url}/dashboard`, { headers: { cookie: cookie! }, redirect: 'manual' })).status).toBe(200);
    await app.rt.db.pool.query(`UPDATE dashboard_sessions SET last_seen_at = now() - interval '12 hours 1 minute' WHERE user_id = (SELECT id FROM dashboard_users WHERE email = 'idle@example.com')`);
    expect((await fetch(`${app.url}/dashboard`, { headers: { cookie: cookie! }, redirect: 'manual' })).status).toBe(303);
  });

  it('limits failed sign-ins per account and per address, in PostgreSQL (shared by every process)', async () => {
    await createUser('limited@example.com');
    for (let i = 0; i < LOGIN_LIMITS.perAccount; i++) expect((await signIn('limited@example.com', `wrong-${i}`)).res.status).toBe(401);
    // Past the limit, even the right password is refused, on another process too.
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const limited = await fetch(`${other.url}/dashboard/login`, form({ email: 'limited@example.com', password }));
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await limited.text()).toContain('Too many failed sign-ins');
    } finally {
      await other.stop();
    }
    const { rows } = await app.rt.db.pool.query(`SELECT key, points FROM dashboard_login_limits WHERE key = 'acct:limited@example.com'`);
    expect(rows[0].points).toBe(LOGIN_LIMITS.perAccount);

    // Per address: failures against many accounts from one address (127.0.0.1 here).
    await app.rt.db.pool.query(`UPDATE dashboard_login_limits SET points = $1 WHERE key LIKE 'addr:%'`, [LOGIN_LIMITS.perAddress]);
    await createUser('fresh@example.com');
    expect((await signIn('fresh@example.com')).res.status).toBe(429);
    await app.rt.db.pool.query(`DELETE FROM dashboard_login_limits`);
    expect((await signIn('fresh@example.com')).res.status).toBe(303);
  });

  it('refuses a sign-in posted from another origin', async () => {
    await createUser('origin@example.com');
    const res = await signIn('origin@example.com', password, { origin: 'http://evil.example' });
    expect(res.res.status).toBe(403);
    expect(res.cookie).toBeUndefined();
  });
});

describe('the session on /graphql', () => {
  it('acts for the user’s project only with the matching x-csrf-token; a cross-site request changes nothing', async () => {
    await createUser('bo@example.com');
    const { cookie } = await signIn('bo@example.com');
    const csrf = await csrfOf(cookie!);
    const mutation = { query: 'mutation { createApiKey(name: "from-dashboard") { apiKey { id } } }' };
    const keysBefore = await app.rt.db.prisma.apiKey.count({ where: { projectId } });

    for (const headers of [
      { cookie: cookie!, 'content-type': 'application/json' },
      { cookie: cookie!, 'content-type': 'application/json', 'x-csrf-token': 'wrong' },
      { cookie: cookie!, 'content-type': 'text/plain' },
      { cookie: cookie!, 'content-type': 'application/json', 'x-csrf-token': csrf, origin: 'http://evil.example' },
    ] as Record<string, string>[]) {
      const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers, body: JSON.stringify(mutation) });
      // A text/plain body (what a cross-site form or simple fetch can send) is refused before auth (415).
      expect(headers['content-type'] === 'text/plain' ? [415, 401] : [401]).toContain(res.status);
      if (res.status === 401) expect((await res.json()).errors[0].extensions.code).toBe('unauthorized');
    }
    expect(await app.rt.db.prisma.apiKey.count({ where: { projectId } })).toBe(keysBefore);

    const ok = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { cookie: cookie!, 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify({ query: '{ project { id } }' }) });
    expect((await ok.json()).data.project.id).toBe(projectId);
    // The audit log names the user as the actor.
    const created = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { cookie: cookie!, 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify(mutation) });
    expect((await created.json()).data.createApiKey.apiKey.id).toBeTruthy();
    // CORS never lets another site read answers with credentials.
    const preflight = await fetch(`${app.url}/graphql`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-csrf-token' } });
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    // An API key still works as before.
    expect((await app.api(apiKey, 'POST', '/graphql', { query: '{ project { id } }' })).body.data.project.id).toBe(projectId);
  });

  it('accepts the session on graphql-ws only with connectionParams.csrfToken', async () => {
    await createUser('ws@example.com');
    const { cookie } = await signIn('ws@example.com');
    const csrf = await csrfOf(cookie!);
    const connect = (params: Record<string, unknown>) =>
      new Promise<string>((resolve) => {
        const client = createClient({
          url: app.url.replace('http', 'ws') + '/graphql',
          webSocketImpl: class extends WebSocket {
            constructor(url: string, protocols: string[]) {
              super(url, protocols, { headers: { cookie: cookie! } });
            }
          },
          connectionParams: params,
          retryAttempts: 0,
        });
        client.subscribe(
          { query: '{ project { id } }' },
          {
            next: (r: any) => resolve(r.data?.project?.id ?? 'no-data'),
            error: () => resolve('refused'),
            complete: () => {},
          },
        );
        setTimeout(() => resolve('timeout'), 5_000);
      }).finally(() => {});
    expect(await connect({})).toBe('refused');
    expect(await connect({ csrfToken: 'wrong' })).toBe('refused');
    expect(await connect({ csrfToken: csrf })).toBe(projectId);
  });
});

describe('serving the build', () => {
  it('serves hashed assets compressed with long cache headers', async () => {
    expect(existsSync('dashboard/dist/index.html'), 'npm install builds the dashboard (postinstall)').toBe(true);
    await createUser('assets@example.com');
    const { cookie } = await signIn('assets@example.com');
    const html = await (await fetch(`${app.url}/dashboard`, { headers: { cookie: cookie! } })).text();
    const script = /<script type="module" crossorigin src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)![1];
    const res = await fetch(app.url + script, { headers: { 'accept-encoding': 'br' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-type')).toContain('text/javascript');
    expect((await fetch(`${app.url}/dashboard/assets/nope.js`)).status).toBe(404);
    expect((await fetch(`${app.url}/dashboard/assets/..%2F..%2Fpackage.json`)).status).toBe(404);
  });
});
