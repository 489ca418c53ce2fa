// Dashboard users and their sessions (CONTRACT §11): created by the admin CLI, signed in with
// email and password, sessions kept in PostgreSQL so any API process serves any session.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import type { Auth } from '../auth.ts';
import { InvalidRequest } from '../errors.ts';
import { newId } from '../ids.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { generatePassword, hashPassword, UNKNOWN_USER_HASH, verifyPassword } from './passwords.ts';

type Rt = Pick<Runtime, 'db'>;

/** Sessions end after this long without a request. */
export const SESSION_IDLE_SECONDS = 12 * 60 * 60;
/** Failed sign-ins allowed per window: per client address, and per account (email). */
export const LOGIN_LIMITS = { perAddress: 20, perAccount: 10, windowSeconds: 15 * 60 };

const EMAIL = /^[^\s@]+@[^\s@]+$/;

export interface DashboardUserView {
  id: string;
  email: string;
  projectId: string;
  createdAt: Date;
}

/** `user create`: a user of one project; a password is generated when none is given (and returned, once). */
export async function createUser(rt: Rt, input: { email: string; projectId: string; password?: string }): Promise<{ user: DashboardUserView; password: string }> {
  const email = input.email.trim().toLowerCase();
  if (!EMAIL.test(email) || email.length > 254) throw new InvalidRequest('email must be an email address', 'email');
  if (input.password !== undefined && input.password.length < 8) throw new InvalidRequest('password must be at least 8 characters', 'password');
  await getProject(rt, input.projectId);
  const password = input.password ?? generatePassword();
  const passwordHash = await hashPassword(password);
  const existing = await rt.db.prisma.dashboardUser.findUnique({ where: { email } });
  if (existing) throw new InvalidRequest('a user with this email already exists', 'email');
  const row = await rt.db.prisma.dashboardUser.create({ data: { id: newId('usr'), email, projectId: input.projectId, passwordHash } });
  return { user: { id: row.id, email: row.email, projectId: row.projectId, createdAt: row.createdAt }, password };
}

const limiters = new WeakMap<object, { address: RateLimiterPostgres; account: RateLimiterPostgres }>();

/** Counters in PostgreSQL (rate-limiter-flexible), so the limits hold across API processes. */
function loginLimiters(rt: Rt) {
  let l = limiters.get(rt.db);
  if (!l) {
    const common = { storeClient: rt.db.pool, storeType: 'pool', tableName: 'dashboard_login_limits', tableCreated: true, duration: LOGIN_LIMITS.windowSeconds };
    l = {
      address: new RateLimiterPostgres({ ...common, keyPrefix: 'addr', points: LOGIN_LIMITS.perAddress }),
      account: new RateLimiterPostgres({ ...common, keyPrefix: 'acct', points: LOGIN_LIMITS.perAccount }),
    };
    limiters.set(rt.db, l);
  }
  return l;
}

function secondsUntil(res: RateLimiterRes | null): number {
  return Math.max(1, Math.ceil((res?.msBeforeNext ?? 1000) / 1000));
}

export type SignInResult =
  | { ok: true; token: string; csrfToken: string }
  | { ok: false; reason: 'invalid_credentials' }
  | { ok: false; reason: 'rate_limited'; retryAfterSec: number };

/**
 * Checks email and password and opens a session. Failures count against the client address and
 * the account; past either limit, sign-in is refused (even with the right password) until the
 * window ends.
 */
export async function signIn(rt: Rt, input: { email: string; password: string; address: string }): Promise<SignInResult> {
  // Keys stay within the limiter table's varchar(255), prefix included.
  const email = input.email.trim().toLowerCase().slice(0, 240);
  const limits = loginLimiters(rt);
  const [byAddress, byAccount] = await Promise.all([limits.address.get(input.address), limits.account.get(email)]);
  for (const [res, max] of [[byAddress, LOGIN_LIMITS.perAddress], [byAccount, LOGIN_LIMITS.perAccount]] as const) {
    if (res && res.consumedPoints >= max) return { ok: false, reason: 'rate_limited', retryAfterSec: secondsUntil(res) };
  }
  const user = email ? await rt.db.prisma.dashboardUser.findUnique({ where: { email } }) : null;
  const valid = await verifyPassword(input.password, user?.passwordHash ?? UNKNOWN_USER_HASH);
  if (!user || !valid) {
    await Promise.all([limits.address.penalty(input.address, 1), limits.account.penalty(email, 1)]);
    return { ok: false, reason: 'invalid_credentials' };
  }
  await limits.account.delete(email);
  const token = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  // Sessions idle past their expiry are removed as new ones open (by the last_seen_at index).
  await rt.db.pool.query(`DELETE FROM dashboard_sessions WHERE last_seen_at < now() - make_interval(secs => $1)`, [SESSION_IDLE_SECONDS]);
  await rt.db.prisma.dashboardSession.create({ data: { id: sessionId(token), projectId: user.projectId, userId: user.id, csrfToken } });
  return { ok: true, token, csrfToken };
}

function sessionId(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export interface DashboardSession {
  userId: string;
  email: string;
  projectId: string;
  csrfToken: string;
}

/** The live session of a cookie token, or null (unknown, ended, or idle for 12 h). Refreshes its idle clock. */
export async function findSession(rt: Rt, token: string | undefined): Promise<DashboardSession | null> {
  if (!token || token.length > 200) return null;
  const id = sessionId(token);
  const { rows } = await rt.db.pool.query<{ user_id: string; email: string; project_id: string; csrf_token: string; stale: boolean }>(
    `SELECT u.id AS user_id, u.email, u.project_id, s.csrf_token, s.last_seen_at < now() - interval '1 minute' AS stale
     FROM dashboard_sessions s JOIN dashboard_users u ON u.id = s.user_id
     WHERE s.id = $1 AND s.last_seen_at > now() - make_interval(secs => $2)`,
    [id, SESSION_IDLE_SECONDS],
  );
  if (rows.length === 0) return null;
  // The idle clock to the minute: one write per session per minute at most.
  if (rows[0].stale) await rt.db.pool.query('UPDATE dashboard_sessions SET last_seen_at = now() WHERE id = $1', [id]);
  return { userId: rows[0].user_id, email: rows[0].email, projectId: rows[0].project_id, csrfToken: rows[0].csrf_token };
}

/** Whether `given` is the session's CSRF token (constant time). */
export function csrfMatches(session: DashboardSession, given: string | null | undefined): boolean {
  if (!given) return false;
  const a = Buffer.from(session.csrfToken);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** What a request made with a session acts as: the user's project; the user's id is the audit actor. */
export function sessionAuth(session: DashboardSession): Auth {
  return { projectId: session.projectId, apiKeyId: session.userId };
}

/** Ends the session of a cookie token (nothing when there is none). */
export async function endSession(rt: Rt, token: string | undefined): Promise<void> {
  if (!token) return;
  await rt.db.pool.query('DELETE FROM dashboard_sessions WHERE id = $1', [sessionId(token)]);
}
