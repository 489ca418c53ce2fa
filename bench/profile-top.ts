// Summarises a V8 .cpuprofile (from `npm run bench -- --cpu-prof`): where the service spent its
// CPU, by function (self time) and by package, so a bottleneck shows without opening DevTools.
//   npx tsx bench/profile-top.ts bench/results/profiles/CPU.….cpuprofile [--top 30]
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '30' } } });
if (positionals.length !== 1) {
  process.stderr.write('usage: npx tsx bench/profile-top.ts <file.cpuprofile> [--top N]\n');
  process.exit(2);
}
const top = Number(values.top);
const profile: CpuProfile = JSON.parse(await readFile(positionals[0], 'utf8'));

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
// timeDeltas[i] is the time before sample i; attribute it to the sample's node.
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

function where(url: string): string {
  if (!url) return '';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = path.slice(nm + '/node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (path.startsWith('node:')) return 'node';
  const src = path.search(/\/(src|bench|jobs)\//);
  return src >= 0 ? path.slice(src + 1) : path;
}

const IDLE = new Set(['(idle)', '(program)', '(garbage collector)']);
const byFunction = new Map<string, number>();
const byPackage = new Map<string, number>();
let idleUs = 0;
for (const [id, us] of selfUs) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  if (functionName === '(idle)') idleUs += us;
  const pkg = IDLE.has(functionName) ? functionName : url ? where(url) : '(native / V8)';
  const fn = `${functionName || '(anonymous)'} ${url ? `${where(url)}:${lineNumber + 1}` : ''}`.trim();
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + us);
}

const busyUs = totalUs - idleUs;
const pct = (us: number) => `${((us / busyUs) * 100).toFixed(1).padStart(5)} %`;
const print = (title: string, m: Map<string, number>, n: number) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, us] of [...m].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, n)) {
    process.stdout.write(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
  }
};
process.stdout.write(`${(totalUs / 1e6).toFixed(1)} s profiled, ${(busyUs / 1e6).toFixed(1)} s on the CPU (percentages are of that)\n`);
print('Self time by package (node_modules package, src file, or V8 bucket):', byPackage, top);
print('Self time by function:', byFunction, top);
