/**
 * Self time of a V8 CPU profile (`--cpu-prof`, as `npm run bench -- --profile`
 * writes them to bench/results/profiles/), by function and by file:
 *
 *   node --import tsx scripts/cpu-profile-summary.ts <file.cpuprofile> [top N (25)]
 *
 * Self time is each sample's top frame: what the process was doing itself,
 * not what it called. Files are shortened to their path from src/ or
 * node_modules/ (`node:` built-ins as they are).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

const [file, topArgument] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: cpu-profile-summary.ts <file.cpuprofile> [top N]');
  process.exit(2);
}
const top = Number(topArgument ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});

const shortFile = (url: string) => {
  if (url === '') return '(native)';
  const at = Math.max(url.lastIndexOf('/src/'), url.lastIndexOf('/dist/'), url.lastIndexOf('/node_modules/'));
  return at < 0 ? url.replace(/^file:\/\//, '') : url.slice(at + 1);
};
const functions = new Map<string, number>();
const files = new Map<string, number>();
let total = 0;
let idle = 0;
for (const [id, us] of selfUs) {
  const frame = byId.get(id)?.callFrame;
  if (frame === undefined) continue;
  total += us;
  if (frame.functionName === '(idle)') {
    idle += us;
    continue;
  }
  const where = shortFile(frame.url);
  const name = `${frame.functionName || '(anonymous)'} ${where}${frame.url === '' ? '' : `:${frame.lineNumber + 1}`}`;
  functions.set(name, (functions.get(name) ?? 0) + us);
  files.set(where, (files.get(where) ?? 0) + us);
}
const busy = total - idle;
const table = (title: string, entries: Map<string, number>) => {
  console.log(`\n| ${title} | self ms | % of busy |\n|---|---|---|`);
  for (const [name, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`| ${name} | ${(us / 1000).toFixed(0)} | ${((100 * us) / busy).toFixed(1)} |`);
};
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled, ${(busy / 1000).toFixed(0)} ms busy (idle left out)`);
table('function', functions);
table('file', files);
