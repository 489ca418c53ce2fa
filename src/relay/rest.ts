// The service's REST API (/v1) with the API key, and its HTTP ingest.
import { RelayError } from './output.ts';
import type { Connection } from './settings.ts';

async function answerOf(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return text;
  }
}

/** The contract's error body as one RelayError: `404 not_found: No webhook with id …`. */
function failure(res: Response, body: unknown, what: string): RelayError {
  const e = (body as { error?: { code?: string; message?: string } } | null)?.error;
  const code = e?.code ?? `http_${res.status}`;
  if (res.status === 401 && what.startsWith('/v1')) return new RelayError(code, `the server refused the API key (401 ${code}): check --api-key or RELAY_API_KEY.`, 401);
  return new RelayError(code, `${res.status} ${code}: ${e?.message ?? (typeof body === 'string' && body ? body.slice(0, 200) : res.statusText)}`, res.status);
}

async function call(url: string, init: RequestInit, what: string): Promise<{ body: unknown; status: number }> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new RelayError('unreachable', `cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const body = await answerOf(res);
  if (!res.ok) throw failure(res, body, what);
  return { body, status: res.status };
}

export function createRestClient(conn: Connection) {
  const auth = { authorization: `Bearer ${conn.apiKey}` };
  return {
    get: async <T>(path: string, query: Record<string, string | undefined> = {}): Promise<T> => {
      const q = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
      const qs = q.size ? `?${q}` : '';
      return (await call(`${conn.baseUrl}${path}${qs}`, { headers: auth }, path)).body as T;
    },
    post: async <T>(path: string, body?: unknown): Promise<T> =>
      (await call(`${conn.baseUrl}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) }, path)).body as T,
    /** HTTP ingest (`/i/{publicId}`): authenticated by the webhook's ingest secret, not the API key. */
    ingest: async <T>(publicId: string, body: Buffer, headers: Record<string, string>): Promise<{ body: T; status: number }> => {
      const r = await call(`${conn.baseUrl}/i/${encodeURIComponent(publicId)}`, { method: 'POST', headers, body: new Uint8Array(body) }, '/i');
      return { body: r.body as T, status: r.status };
    },
  };
}

export type RestClient = ReturnType<typeof createRestClient>;
