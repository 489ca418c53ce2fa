// `/dashboard` (CONTRACT §11): the browser UI's shell and hashed assets (built by Vite into
// dashboard/dist on `npm install`), and sign-in / sign-out with a session cookie.
import { readFileSync, existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, gzipSync, constants as zlib } from 'node:zlib';
import { parseCookie, stringifySetCookie } from 'cookie';
import { InvalidRequest, MethodNotAllowed, NotFound } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { csrfMatches, endSession, findSession, SESSION_IDLE_SECONDS, signIn } from '../users/service.ts';
import { mediaType, readBody } from '../wire/body.ts';

export const SESSION_COOKIE = 'relay_session';
const DIST = fileURLToPath(new URL('../../dashboard/dist/', import.meta.url));
const LOGIN_BODY_LIMIT = 16 * 1024;

/** On every /dashboard answer: no inline script, no framing, no sniffing, no referrer to other sites. */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.map': 'application/json',
};

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function send(res: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string>) {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

/** The built shell (index.html) and its stylesheet, read once; null when the build is missing. */
function loadBuild(): { index: string; css: string[] } | null {
  const indexPath = path.join(DIST, 'index.html');
  const manifestPath = path.join(DIST, '.vite', 'manifest.json');
  if (!existsSync(indexPath) || !existsSync(manifestPath)) return null;
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Record<string, { css?: string[]; isEntry?: boolean }>;
  const css = Object.values(manifest).flatMap((e) => (e.isEntry ? (e.css ?? []) : []));
  return { index: readFileSync(indexPath, 'utf8'), css };
}

function loginPage(opts: { css: string[]; error?: string; email?: string; notice?: string }): string {
  const links = opts.css.map((href) => `<link rel="stylesheet" href="/dashboard/${escapeHtml(href)}">`).join('');
  const alert = opts.error ? `<p class="form-error" role="alert" id="login-error">${escapeHtml(opts.error)}</p>` : '';
  const notice = opts.notice ? `<p class="notice" role="status">${escapeHtml(opts.notice)}</p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Relay dashboard</title>${links}</head>
<body class="login-body"><main class="login-card">
<h1>Relay dashboard</h1>${notice}${alert}
<form method="post" action="/dashboard/login" class="stack">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(opts.email ?? '')}"${opts.error ? ' aria-describedby="login-error"' : ''} autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" class="primary">Sign in</button>
</form>
<p class="hint">No account yet? An operator creates one: <code>npm run cli -- user create --email you@example.com --project PROJECT_ID</code></p>
</main></body></html>`;
}

function sessionToken(req: IncomingMessage): string | undefined {
  const header = req.headers.cookie;
  return header ? parseCookie(header)[SESSION_COOKIE] : undefined;
}

/**
 * Whether an `Origin` header names a page of another site: neither the request's own host nor
 * PUBLIC_URL's (behind a proxy that rewrites Host). No Origin (not a browser's cross-site request): false.
 */
export function isForeignOrigin(origin: string | null | undefined, host: string | null | undefined, publicUrl: string): boolean {
  if (!origin) return false;
  try {
    const h = new URL(origin).host;
    return h !== host && h !== new URL(publicUrl).host;
  } catch {
    return true; // "null" (sandboxed or opaque origins) and anything unparsable
  }
}

/** The client's address, for the per-address sign-in limit (the socket's peer: no proxy header is trusted). */
function clientAddress(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? 'unknown';
}

export function createDashboardHandler(rt: Runtime) {
  const secure = rt.config.publicUrl.startsWith('https:');
  let build = loadBuild();
  const compressed = new Map<string, { br: Buffer; gzip: Buffer; raw: Buffer }>();

  const cookie = (value: string, maxAge: number) =>
    stringifySetCookie(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'lax', secure, path: '/', maxAge });

  async function serveAsset(req: IncomingMessage, res: ServerResponse, rel: string) {
    const file = path.join(DIST, rel);
    if (!file.startsWith(path.join(DIST, 'assets') + path.sep)) throw new NotFound('asset');
    let entry = compressed.get(file);
    if (!entry) {
      let raw: Buffer;
      try {
        raw = await readFile(file);
      } catch {
        throw new NotFound('asset');
      }
      entry = { raw, br: brotliCompressSync(raw, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }), gzip: gzipSync(raw, { level: 9 }) };
      compressed.set(file, entry);
    }
    const accept = String(req.headers['accept-encoding'] ?? '');
    const encoding = /\bbr\b/.test(accept) ? 'br' : /\bgzip\b/.test(accept) ? 'gzip' : undefined;
    const headers: Record<string, string> = {
      'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      // Names carry a content hash: a changed file is a new name.
      'cache-control': 'public, max-age=31536000, immutable',
      vary: 'accept-encoding',
    };
    if (encoding) headers['content-encoding'] = encoding;
    send(res, 200, encoding ? entry[encoding] : entry.raw, headers);
  }

  function notBuilt(res: ServerResponse) {
    send(res, 503, 'The dashboard is not built: run `npm run dashboard:build` (npm install does it).', { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' });
  }

  return async function handleDashboard(req: IncomingMessage, res: ServerResponse, url: URL) {
    build ??= loadBuild();
    const sub = url.pathname.slice('/dashboard'.length);
    const method = req.method ?? 'GET';

    if (sub.startsWith('/assets/')) {
      if (method !== 'GET' && method !== 'HEAD') throw new MethodNotAllowed(['GET', 'HEAD']);
      return serveAsset(req, res, decodeURIComponent(sub.slice(1)));
    }
    if (!build) return notBuilt(res);

    if (sub === '/login') {
      if (method === 'GET' || method === 'HEAD') {
        if (await findSession(rt, sessionToken(req))) return send(res, 303, '', { location: '/dashboard', 'cache-control': 'no-store' });
        return send(res, 200, loginPage({ css: build.css, notice: url.searchParams.has('signed-out') ? 'You are signed out.' : undefined }), { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      }
      if (method !== 'POST') throw new MethodNotAllowed(['GET', 'POST']);
      if (isForeignOrigin(req.headers.origin, req.headers.host, rt.config.publicUrl)) return send(res, 403, loginPage({ css: build.css, error: 'Sign in from this site’s own page.' }), { 'content-type': 'text/html; charset=utf-8' });
      if (mediaType(req.headers['content-type']) !== 'application/x-www-form-urlencoded') {
        req.resume();
        throw new InvalidRequest('Sign in with the form: application/x-www-form-urlencoded fields email and password.', 'content-type');
      }
      const form = new URLSearchParams((await readBody(req, LOGIN_BODY_LIMIT)).toString('utf8'));
      const email = form.get('email') ?? '';
      const result = await signIn(rt, { email, password: form.get('password') ?? '', address: clientAddress(req) });
      if (result.ok) {
        return send(res, 303, '', { location: '/dashboard', 'set-cookie': cookie(result.token, SESSION_IDLE_SECONDS), 'cache-control': 'no-store' });
      }
      if (result.reason === 'rate_limited') {
        const minutes = Math.ceil(result.retryAfterSec / 60);
        return send(res, 429, loginPage({ css: build.css, email, error: `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.` }), {
          'content-type': 'text/html; charset=utf-8',
          'retry-after': String(result.retryAfterSec),
          'cache-control': 'no-store',
        });
      }
      return send(res, 401, loginPage({ css: build.css, email, error: 'Wrong email or password.' }), { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    }

    if (sub === '/logout') {
      if (method !== 'POST') throw new MethodNotAllowed(['POST']);
      const token = sessionToken(req);
      const session = await findSession(rt, token);
      // The form carries the CSRF token: another site cannot sign a user out.
      const form = new URLSearchParams((await readBody(req, LOGIN_BODY_LIMIT)).toString('utf8'));
      if (session && (isForeignOrigin(req.headers.origin, req.headers.host, rt.config.publicUrl) || !csrfMatches(session, form.get('csrf') ?? req.headers['x-csrf-token']?.toString()))) {
        return send(res, 403, 'Sign out from the dashboard itself.', { 'content-type': 'text/plain; charset=utf-8' });
      }
      await endSession(rt, token);
      return send(res, 303, '', { location: '/dashboard/login?signed-out', 'set-cookie': cookie('', 0), 'cache-control': 'no-store' });
    }

    // Every other path is a page of the single-page app: the shell, for a signed-in browser.
    if (method !== 'GET' && method !== 'HEAD') throw new MethodNotAllowed(['GET']);
    const session = await findSession(rt, sessionToken(req));
    if (!session) return send(res, 303, '', { location: '/dashboard/login', 'cache-control': 'no-store' });
    const html = build.index
      .replace('__CSRF_TOKEN__', escapeHtml(session.csrfToken))
      .replace('__USER_EMAIL__', escapeHtml(session.email))
      .replace('__PUBLIC_URL__', escapeHtml(rt.config.publicUrl));
    return send(res, 200, html, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  };
}

/** The session a /graphql request (or WebSocket) carries, when it has no API key; null when none. */
export async function sessionOfRequest(rt: Runtime, cookieHeader: string | null | undefined) {
  if (!cookieHeader) return null;
  const token = parseCookie(cookieHeader)[SESSION_COOKIE];
  return token ? findSession(rt, token) : null;
}
