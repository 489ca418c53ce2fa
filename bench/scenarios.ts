// Finds the scenario files (bench/scenarios/*.ts) and checks what they export.
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './processes.ts';
import type { Scenario } from './scenario.ts';

const DIR = path.join(REPO_ROOT, 'bench/scenarios');

export async function loadScenarios(): Promise<Scenario[]> {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.ts')).sort();
  const scenarios: Scenario[] = [];
  for (const file of files) {
    const s = (await import(pathToFileURL(path.join(DIR, file)).href)).default as Scenario | undefined;
    if (!s || typeof s.name !== 'string' || typeof s.description !== 'string' || typeof s.run !== 'function') {
      throw new Error(`bench/scenarios/${file} must export default { name, description, run(ctx) }`);
    }
    if (scenarios.some((o) => o.name === s.name)) throw new Error(`two scenarios are named "${s.name}"`);
    scenarios.push(s);
  }
  return afterTheirBaselines(scenarios);
}

/**
 * File order, except that a scenario whose baseline is another scenario's result (form-ingest
 * against ingest-http) runs after that scenario, so the ratio is taken in the same run.
 */
function afterTheirBaselines(scenarios: Scenario[]): Scenario[] {
  const byName = new Map(scenarios.map((s) => [s.name, s]));
  const ordered: Scenario[] = [];
  const placed = new Set<string>();
  const place = (s: Scenario, depth = 0) => {
    if (placed.has(s.name) || depth > scenarios.length) return;
    const base = s.baseline ? byName.get(s.baseline) : undefined;
    if (base && base !== s) place(base, depth + 1);
    if (!placed.has(s.name)) placed.add(s.name), ordered.push(s);
  };
  for (const s of scenarios) place(s);
  return ordered;
}

export function selectScenarios(all: Scenario[], only: string[] | undefined): Scenario[] {
  if (!only) return all;
  const unknown = only.filter((n) => !all.some((s) => s.name === n));
  if (unknown.length) throw new Error(`unknown scenario ${unknown.join(', ')} (known: ${all.map((s) => s.name).join(', ')})`);
  return all.filter((s) => only.includes(s.name));
}
