// The layering of src/ (docs/architecture.md): dependency-cruiser reads every import and fails on
// an arrow that breaks a rule of .dependency-cruiser.cjs.
import { createRequire } from 'node:module';
import { cruise } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const ruleSet = require('../.dependency-cruiser.cjs');

async function violations(files: string[]) {
  const { output } = await cruise(files, { ruleSet, validate: true, ...ruleSet.options });
  if (typeof output === 'string') throw new Error(output);
  return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

describe('layering of src/', () => {
  it('has no import that breaks a rule (cycles, base importing domains, sibling internals, domains importing the edge)', async () => {
    expect(await violations(['src', 'jobs'])).toEqual([]);
  }, 60_000);

  it('sees the imports it judges (the rules are not vacuous)', async () => {
    const { output } = await cruise(['src'], { ruleSet, validate: true, ...ruleSet.options });
    if (typeof output === 'string') throw new Error(output);
    const arrows = output.modules.flatMap((m) => m.dependencies.map((d) => `${m.source} → ${d.resolved}`));
    expect(arrows).toContain('src/ingest/store-event.ts → src/deliveries/job.ts');
    expect(arrows).toContain('src/deliveries/engine.ts → src/destinations/senders/index.ts');
    expect(arrows.length).toBeGreaterThan(300);
  }, 60_000);
});
