// The bare baselines: the same work as a service feature, with nothing but node:http and pg,
// each served by its own process on the run's PostgreSQL and loaded like the scenario it is
// compared with. A ratio of 0.5 means the service reaches half of the bare throughput.
import { freePort } from '../../src/db/embedded.ts';
import { createScenarioDatabase } from '../database.ts';
import { runAutocannon } from '../load/autocannon.ts';
import { startTsProcess, waitForHttp } from '../processes.ts';
import type { HttpRequestSpec, LoadSettings, Result } from '../scenario.ts';

export interface BaselineDefinition {
  name: string;
  description: string;
  /** The server: reads DATABASE_URL and PORT, answers `GET /ready` once prepared. */
  script: string;
  /** The request autocannon sends. */
  request: HttpRequestSpec;
  /** Served on a fresh database of its own (dropped after), so the rows it writes never sit in the service's tables. */
  ownDatabase?: boolean;
}

/**
 * The one-statement floor: the baseline every delivery and sweep figure is given as a fraction of
 * (ScenarioContext.floor()), measured with the run's settings before the service starts.
 */
export const FLOOR_BASELINE = 'ingest';

/** ~1 KB of JSON, the size of a typical webhook event. */
export const KILOBYTE_EVENT = JSON.stringify({
  type: 'order.updated',
  id: 'evt_bench',
  data: { note: 'x'.repeat(940) },
});

export const BASELINES: BaselineDefinition[] = [
  {
    name: 'insert',
    description: 'node:http + pg: per request one durable transaction (BEGIN; INSERT the ~1 KB body; COMMIT), answered 202.',
    script: 'bench/baselines/insert-server.ts',
    request: { method: 'POST', path: '/rows', headers: { 'content-type': 'application/json' }, body: KILOBYTE_EVENT },
  },
  {
    name: 'ingest',
    description:
      'The one-statement floor. node:http + pg: per request the inserts of HTTP ingest in one durable statement (INSERT the ~1 KB event, its delivery and its graphile-worker job, committing on its own), answered 202; on a fresh database of its own.',
    script: 'bench/baselines/ingest-server.ts',
    request: { method: 'POST', path: '/events', headers: { 'content-type': 'application/json' }, body: KILOBYTE_EVENT },
    ownDatabase: true,
  },
  {
    name: 'read',
    description: 'node:http + pg: per request the 10 newest of 5,000 rows (~200 B each) by an indexed column (ORDER BY id DESC LIMIT 10), JSON.stringify.',
    script: 'bench/baselines/read-server.ts',
    request: { method: 'GET', path: '/rows' },
  },
];

/** Measures baselines on demand, once per name and settings. */
export class BaselineRuns {
  private cache = new Map<string, Promise<Result>>();
  private databases = 0;

  constructor(
    private databaseUrl: string,
    private defaults: LoadSettings,
    private log: (m: string) => void,
  ) {}

  /** Results measured so far (settled ones only), in measurement order. */
  async measured(): Promise<Result[]> {
    const settled = await Promise.allSettled(this.cache.values());
    return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  }

  get(name: string, settings: Partial<LoadSettings> = {}, signal?: AbortSignal): Promise<Result> {
    const s: LoadSettings = { ...this.defaults, ...settings };
    const key = `${name}@${s.connections}c/${s.duration}s/${s.warmup}w`;
    let run = this.cache.get(key);
    if (!run) {
      run = this.measure(name, s, signal);
      this.cache.set(key, run);
      // A failed measurement may be retried by a later caller.
      run.catch(() => this.cache.delete(key));
    }
    return run;
  }

  private async measure(name: string, settings: LoadSettings, signal?: AbortSignal): Promise<Result> {
    const def = BASELINES.find((b) => b.name === name);
    if (!def) throw new Error(`unknown baseline "${name}" (known: ${BASELINES.map((b) => b.name).join(', ')})`);
    const port = await freePort();
    const db = def.ownDatabase ? await createScenarioDatabase(this.databaseUrl, `baseline_${name}_${++this.databases}`) : undefined;
    const proc = startTsProcess(def.script, { label: `baseline ${name}`, env: { DATABASE_URL: db?.url ?? this.databaseUrl, PORT: String(port), NODE_ENV: 'production' } });
    try {
      const url = `http://127.0.0.1:${port}`;
      await waitForHttp(`${url}/ready`, proc, 60_000);
      this.log(`baseline ${name}: ${settings.connections} connections, ${settings.warmup} s warm-up + ${settings.duration} s`);
      const figures = await runAutocannon({ url, ...def.request, ...settings }, settings, signal);
      return { name: `baseline:${name}`, ...figures };
    } finally {
      await proc.stop(5_000);
      await db?.dispose().catch((e) => this.log(`could not drop the database of baseline ${name}: ${e.message}`));
    }
  }
}
