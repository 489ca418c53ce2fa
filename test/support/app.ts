import { startApp, type App } from '../../src/app.ts';
import { config, type Config } from '../../src/config.ts';
import { createProject } from '../../src/projects/service.ts';
import { createTestDatabase } from './database.ts';

export interface TestApp extends App {
  url: string;
  databaseUrl: string;
  /** Creates a project through the service layer; returns its id and API key. */
  project(tier?: string, name?: string): Promise<{ projectId: string; apiKey: string }>;
  /** fetch against this server with the key as Bearer token; JSON bodies are encoded. */
  api(apiKey: string | null, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
}

/**
 * Starts the real service on a free loopback port, on its own database (or on
 * `databaseUrl`, to run several instances against one database). `config` overrides settings
 * of this instance only (as its environment would).
 */
export async function startTestApp(opts: { databaseUrl?: string; api?: boolean; worker?: boolean; config?: Partial<Config> } = {}): Promise<TestApp> {
  const databaseUrl = opts.databaseUrl ?? (await createTestDatabase());
  const app = await startApp({ config: { ...config, ...opts.config, HOST: '127.0.0.1' }, databaseUrl, api: opts.api, worker: opts.worker ?? false, port: 0, smtpPort: 0 });
  const url = app.http?.url ?? '';
  return {
    ...app,
    url,
    databaseUrl,
    async project(tier = 'free', name = 'test') {
      const { project, secret } = await createProject(app.rt, { name, tier });
      return { projectId: project.id, apiKey: secret };
    },
    async api(apiKey, method, path, body, headers = {}) {
      const h: Record<string, string> = { ...headers };
      if (apiKey) h.authorization = `Bearer ${apiKey}`;
      let payload: string | undefined;
      if (body !== undefined) {
        if (typeof body === 'string') payload = body;
        else {
          payload = JSON.stringify(body);
          h['content-type'] ??= 'application/json';
        }
      }
      const res = await fetch(url + path, { method, headers: h, body: payload });
      const text = await res.text();
      let parsed: any = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        /* not JSON */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
  };
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (bounded). */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 10_000, intervalMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`waitFor: condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
