// The layering of src/ (docs/architecture.md): dependency-cruiser reads every import and fails on
// an arrow that breaks a rule of .dependency-cruiser.cjs; the folder graph built from the same
// imports has no cycle; every module of src/ sits in a layer. Each check is also run on a planted
// tree (one violation per rule) and must fire there, so none of them passes vacuously.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const ruleSet = require('../.dependency-cruiser.cjs') as { forbidden: IForbiddenRuleType[]; options: Record<string, unknown> };

async function cruised(files: string[], baseDir?: string): Promise<ICruiseResult> {
  const options = baseDir ? { ...ruleSet.options, tsConfig: undefined, baseDir } : ruleSet.options;
  const { output } = await cruise(files, { ruleSet, validate: true, ...options });
  if (typeof output === 'string') throw new Error(output);
  return output;
}

const violations = (result: ICruiseResult) => result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`).sort();

/**
 * A module's folder in the folder graph: `src/<folder>/` for everything under it (sub-folders
 * included), `jobs/`, and each file at the top of src/ as its own node (config.ts, app.ts, …).
 */
function folderOf(path: string): string | null {
  if (path.startsWith('jobs/')) return 'jobs/';
  const folder = /^src\/[^/]+\//.exec(path)?.[0];
  if (folder) return folder === 'src/generated/' ? null : folder;
  return path.startsWith('src/') ? path : null;
}

/** The folder cycles (strongly connected folders) and the imports that run between their folders. */
function folderCycles(result: ICruiseResult): { folders: string[]; imports: string[] }[] {
  const edges = new Map<string, Set<string>>();
  const imports: [string, string, string][] = [];
  for (const m of result.modules) {
    const from = folderOf(m.source);
    if (!from) continue;
    for (const d of m.dependencies) {
      const to = folderOf(d.resolved);
      if (!to || to === from) continue;
      edges.set(from, (edges.get(from) ?? new Set()).add(to));
      imports.push([from, to, `${m.source} → ${d.resolved}`]);
    }
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do component.push((w = stack.pop()!));
      while (w !== v);
      if (component.length > 1) cycles.push(component.sort());
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return cycles.map((folders) => ({
    folders,
    imports: imports.filter(([a, b]) => folders.includes(a) && folders.includes(b)).map(([, , arrow]) => arrow).sort(),
  }));
}

/** Layers as the rules name them: the `from` of the rule that binds each one. */
const rule = (name: string) => ruleSet.forbidden.find((r) => r.name === name)!;
const LAYERS: Record<string, RegExp> = {
  base: new RegExp(rule('base-imports-no-domain').from.path as string),
  domain: new RegExp(rule('domain-to-sibling-internals').from.path as string),
  edge: new RegExp(rule('edge-imports-only-public').from.path as string),
  'entry point': /^src\/(main|api|worker|cli|bootstrap|app)\.ts$/,
  'relay command': new RegExp(rule('relay-command-is-a-client').from.path as string),
};

/** Top-level modules of src/ (a file, or a file standing for its folder) in no layer or in several. */
function unplaced(root: string): string[] {
  return readdirSync(join(root, 'src'), { withFileTypes: true })
    .filter((e) => e.name !== 'generated' && (e.isDirectory() || /\.ts$/.test(e.name)))
    .map((e) => (e.isDirectory() ? `src/${e.name}/any.ts` : `src/${e.name}`))
    .filter((path) => Object.values(LAYERS).filter((layer) => layer.test(path)).length !== 1)
    .sort();
}

describe('layering of src/', () => {
  it('has no import that breaks a rule (cycles, base importing domains, domain order, sibling internals, edge reaching internals, domains importing the edge)', async () => {
    expect(violations(await cruised(['src', 'jobs']))).toEqual([]);
  }, 60_000);

  it('has folders that import one way: the folder graph has no cycle', async () => {
    expect(folderCycles(await cruised(['src', 'jobs']))).toEqual([]);
  }, 60_000);

  it('places every module of src/ in exactly one layer (tracing.ts, wire/ and outbound/ among the base)', () => {
    expect(unplaced('.')).toEqual([]);
    for (const base of ['src/tracing.ts', 'src/config.ts', 'src/db/client.ts', 'src/wire/body.ts', 'src/outbound/http-client.ts', 'src/graphql/builder.ts'])
      expect(LAYERS.base.test(base), base).toBe(true);
  });

  it('sees the imports it judges (the rules are not vacuous)', async () => {
    const output = await cruised(['src']);
    const arrows = output.modules.flatMap((m) => m.dependencies.map((d) => `${m.source} → ${d.resolved}`));
    expect(arrows).toContain('src/ingest/store-event.ts → src/deliveries/job.ts');
    expect(arrows).toContain('src/deliveries/engine.ts → src/destinations/senders/index.ts');
    expect(arrows.length).toBeGreaterThan(300);
  }, 60_000);

  describe('on a planted tree, each rule fires', () => {
    let root: string;
    // file → what it imports; every target exists, so each import resolves.
    const PLANTED: Record<string, string[]> = {
      'src/tracing.ts': ['src/deliveries/engine.ts'], // base → domain
      'src/outbound/http-client.ts': ['src/destinations/senders/index.ts'], // base folder → domain
      'src/config.ts': ['src/http/server.ts'], // base → edge
      'src/webhooks/a.ts': ['src/webhooks/b.ts'], // file cycle
      'src/webhooks/b.ts': ['src/webhooks/a.ts'],
      'src/routing/service.ts': ['src/webhooks/create-webhook.ts'], // a sibling's internals, and a domain above
      'src/projects/service.ts': ['src/users/service.ts'], // public, but a domain above
      'src/files/service.ts': ['src/retention/run.ts'], // with the next: a folder cycle, no file cycle
      'src/retention/run.ts': ['src/files/store.ts'],
      'src/http/routes.ts': ['src/webhooks/create-webhook.ts', 'src/users/service.ts'], // edge → internals; → public is fine
      'jobs/deliveries__attempt.ts': ['src/deliveries/claim.ts'], // edge → internals
      'src/ingest/http-ingest.ts': ['src/http/server.ts'], // domain → edge
      'src/relay/main.ts': ['src/config.ts'], // the relay command → the service
      'src/app.ts': ['src/relay/main.ts'], // the service → the relay command
      'src/unplaced.ts': [], // a top-level module in no layer
      'src/newfolder/x.ts': [], // a folder in no layer
    };

    beforeAll(() => {
      root = mkdtempSync(join(tmpdir(), 'layering-'));
      const files = new Set([...Object.keys(PLANTED), ...Object.values(PLANTED).flat()]);
      for (const file of files) {
        const imports = (PLANTED[file] ?? []).map((target) => {
          const relative = join(...dirname(file).split('/').map(() => '..'), target);
          return `import '${relative.startsWith('.') ? relative : `./${relative}`}';\n`;
        });
        mkdirSync(join(root, dirname(file)), { recursive: true });
        writeFileSync(join(root, file), `${imports.join('')}export {};\n`);
      }
    });
    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it('reports each planted import under its rule, and every rule fires', async () => {
      const found = violations(await cruised(['src', 'jobs'], root));
      expect(found).toEqual([
        'base-imports-no-domain: src/config.ts → src/http/server.ts',
        'base-imports-no-domain: src/outbound/http-client.ts → src/destinations/senders/index.ts',
        'base-imports-no-domain: src/tracing.ts → src/deliveries/engine.ts',
        'domain-order: src/files/service.ts → src/retention/run.ts',
        'domain-order: src/projects/service.ts → src/users/service.ts',
        'domain-order: src/routing/service.ts → src/webhooks/create-webhook.ts',
        'domain-to-edge: src/ingest/http-ingest.ts → src/http/server.ts',
        'domain-to-sibling-internals: src/routing/service.ts → src/webhooks/create-webhook.ts',
        'edge-imports-only-public: jobs/deliveries__attempt.ts → src/deliveries/claim.ts',
        'edge-imports-only-public: src/http/routes.ts → src/webhooks/create-webhook.ts',
        'no-circular: src/webhooks/a.ts → src/webhooks/b.ts',
        'nothing-imports-the-relay-command: src/app.ts → src/relay/main.ts',
        'relay-command-is-a-client: src/relay/main.ts → src/config.ts',
      ]);
      const fired = new Set(found.map((v) => v.split(':')[0]));
      expect(ruleSet.forbidden.map((r) => r.name).filter((name) => !fired.has(name ?? ''))).toEqual([]);
    }, 60_000);

    it('finds the folder cycle that no file cycle shows', async () => {
      expect(folderCycles(await cruised(['src', 'jobs'], root))).toEqual([
        { folders: ['src/files/', 'src/retention/'], imports: ['src/files/service.ts → src/retention/run.ts', 'src/retention/run.ts → src/files/store.ts'] },
      ]);
    }, 60_000);

    it('finds the modules in no layer', () => {
      expect(unplaced(root)).toEqual(['src/newfolder/any.ts', 'src/unplaced.ts']);
    });
  });
});
