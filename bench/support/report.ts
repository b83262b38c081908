import type { LoopResult } from './closed-loop.js';
import { READ_OPS, STORE_OP_OF, WRITE_OPS, type WorkerOp } from './workloads.js';

export type Group = 'broker' | 'store' | 'worker' | 'gateway' | 'growth';

export interface ScenarioResult extends LoopResult {
  readonly id: string;
  readonly group: Group;
  /** `echo`, a store baseline, a worker op or `mixed`. */
  readonly op: string;
  readonly workers: number;
  /** User rules in each ruleset (growth) and users the load is spread over. */
  readonly userRules: number;
  readonly users: number;
  /** CPU use in % of one core while measuring, per process (`load` is the benchmark itself). */
  readonly cpu: Readonly<Record<string, number>>;
  /** The highest worker RSS sampled during the scenario. */
  readonly workerRssBytes: number | undefined;
  /** Reads the client sent to the request queue instead of the read queue (absent: none). */
  readonly readFallbacks?: number;
}

/** A worker process's RSS high-water mark (`VmHWM`) and the scenarios it ran. */
export interface RssPeak {
  readonly ran: string;
  readonly bytes: number;
}

const RSS_TARGET_BYTES = 200 * 1024 * 1024;

/**
 * Issue 17's targets for reads through the client's routing (the classic
 * read queue), judged against the classic echo baseline.
 */
const READ_P50_MARGIN_MS = 0.15;
const READ_SHARE = 0.6;
const WORKER_CPU_TARGET_US = 100;
/**
 * Each write's req/s ÷ its store baseline at c = 64, one worker, in the
 * last full run before issue 17 (bench/results/2026-11-21-issue-6.md).
 * Writes must stay within noise of it: at least 90% of it.
 */
export const WRITE_REFERENCE_RATIOS: Readonly<Partial<Record<WorkerOp, number>>> = {
  set_pushrule_enabled: 0.49,
  set_pushrule: 0.52,
  set_pusher: 0.71,
};
const WRITE_NOISE = 0.9;

export interface TargetCheck {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
  /** The figure could not be measured in this run (`measured` says why): neither met nor missed. */
  readonly unjudged?: boolean;
}

const find = (results: readonly ScenarioResult[], match: Partial<ScenarioResult>) =>
  results.find((r) => Object.entries(match).every(([key, value]) => r[key as keyof ScenarioResult] === value));

/** The targets for this machine, each with the ratio it was judged on. */
export function checkTargets(results: readonly ScenarioResult[], peaks: readonly RssPeak[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const echo = (concurrency: number) => find(results, { group: 'broker', op: 'echo', concurrency });
  const store = (op: string, concurrency: number) => find(results, { group: 'store', op, concurrency });
  const worker = (op: string, concurrency: number) => find(results, { group: 'worker', op, concurrency, workers: 1 });

  for (const op of [...READ_OPS, ...WRITE_OPS]) {
    const share = READ_OPS.includes(op) ? 0.5 : 0.35;
    const w = worker(op, 64);
    const b = echo(64);
    const s = store(STORE_OP_OF[op], 64);
    if (w === undefined || b === undefined || s === undefined) continue;
    const limit = Math.min(b.throughput, s.throughput);
    const ratio = w.throughput / limit;
    checks.push({
      target: `${op} at c=64 ≥ ${pct(share)} of min(broker, store ${STORE_OP_OF[op]})`,
      measured: `${fmt(w.throughput)}/s of ${fmt(limit)}/s (${b.throughput <= s.throughput ? 'broker' : 'store'}) = ${pct(ratio)}`,
      // A baseline that answered nothing gives no limit to be judged against.
      met: Number.isFinite(ratio) && ratio >= share,
    });
  }
  for (const op of [...READ_OPS, ...WRITE_OPS] as WorkerOp[]) {
    const w = worker(op, 1);
    const b = echo(1);
    const s = store(STORE_OP_OF[op], 1);
    if (w === undefined || b === undefined || s === undefined) continue;
    const bound = b.p50Ms + s.p50Ms + 0.5;
    checks.push({
      target: `${op} p50 at c=1 ≤ broker p50 + store p50 + 0.5 ms`,
      measured: `${ms(w.p50Ms)} vs ${ms(b.p50Ms)} + ${ms(s.p50Ms)} + 0.5 = ${ms(bound)} (${pct(w.p50Ms / bound)} of the bound)`,
      met: w.p50Ms <= bound,
    });
  }
  for (const http of results.filter((r) => r.group === 'gateway' && r.op.endsWith(' http'))) {
    const op = http.op.slice(0, -' http'.length);
    const rpc = find(results, { group: 'gateway', op: `${op} rpc`, concurrency: http.concurrency });
    if (rpc === undefined) continue;
    const ratio = http.throughput / rpc.throughput;
    checks.push({
      target: `${op} through HTTP at c=${http.concurrency} ≥ 70% of direct RPC`,
      measured: `${fmt(http.throughput)}/s vs ${fmt(rpc.throughput)}/s = ${pct(ratio)}`,
      met: ratio >= 0.7,
    });
  }
  const none = find(results, { group: 'growth', userRules: 0 });
  const hundred = find(results, { group: 'growth', userRules: 100 });
  if (none !== undefined && hundred !== undefined) {
    const ratio = hundred.throughput / none.throughput;
    checks.push({
      target: 'writes with 100 user rules ≥ 70% of writes with 0',
      measured: `${fmt(hundred.throughput)}/s vs ${fmt(none.throughput)}/s = ${pct(ratio)}`,
      met: ratio >= 0.7,
    });
  }
  // The worker scenarios, and the heaviest growth row apart: it is the
  // heaviest scenario, and it is bounded by other things (see bench/README.md).
  const main = peaks.filter((p) => p.ran === 'worker/*');
  const growth = [...peaks]
    .filter((p) => p.ran.startsWith('growth/'))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 1);
  for (const peak of [...main, ...growth]) {
    checks.push({
      target: `worker peak RSS ≤ 200 MB (${peak.ran})`,
      measured: `${mb(peak.bytes)} (${pct(peak.bytes / RSS_TARGET_BYTES)} of 200 MB)`,
      met: peak.bytes <= RSS_TARGET_BYTES,
    });
  }
  checks.push(...checkReadTargets(results), ...checkReadFloorTargets(results));
  return checks;
}

/** Issue 35: a read is at the transport's floor, the classic echo alone, with no store in the bound. */
const FLOOR_P50_MARGIN_MS = 0.1;
const FLOOR_RATE_SHARE = 0.6;

function checkReadFloorTargets(results: readonly ScenarioResult[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const classic = (concurrency: number) => find(results, { group: 'broker', op: 'echo-classic', concurrency });
  const worker = (op: string, concurrency: number) => find(results, { group: 'worker', op, concurrency, workers: 1 });
  for (const op of ['get_pushrule_enabled', 'get_pushrules'] as const) {
    const w = worker(op, 1);
    const b = classic(1);
    if (w === undefined || b === undefined) continue;
    const over = w.p50Ms - b.p50Ms;
    checks.push({
      target: `${op} p50 at c=1 − classic echo p50 ≤ ${FLOOR_P50_MARGIN_MS} ms`,
      measured: `${ms(w.p50Ms)} − ${ms(b.p50Ms)} = ${ms(over)}`,
      met: Number.isFinite(over) && over <= FLOOR_P50_MARGIN_MS,
    });
  }
  for (const op of ['get_pushrules', 'get_pushrule_enabled'] as const) {
    const w = worker(op, 64);
    const b = classic(64);
    if (w === undefined || b === undefined) continue;
    const ratio = w.throughput / b.throughput;
    checks.push({
      target: `${op} at c=64 ÷ classic echo ≥ ${FLOOR_RATE_SHARE}`,
      measured: `${fmt(w.throughput)}/s ÷ ${fmt(b.throughput)}/s = ${ratio.toFixed(2)}`,
      met: Number.isFinite(ratio) && ratio >= FLOOR_RATE_SHARE,
    });
  }
  return checks;
}

/** Issue 17: reads through the client's routing, against the classic echo; worker CPU; writes as before. */
function checkReadTargets(results: readonly ScenarioResult[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const classic = (concurrency: number) => find(results, { group: 'broker', op: 'echo-classic', concurrency });
  const store = (op: string, concurrency: number) => find(results, { group: 'store', op, concurrency });
  const worker = (op: string, concurrency: number) => find(results, { group: 'worker', op, concurrency, workers: 1 });
  for (const op of ['get_pushrule_enabled', 'get_pushrules'] as const) {
    const w = worker(op, 1);
    const b = classic(1);
    const s = store(STORE_OP_OF[op], 1);
    if (w === undefined || b === undefined || s === undefined) continue;
    const bound = b.p50Ms + s.p50Ms + READ_P50_MARGIN_MS;
    checks.push({
      target: `${op} p50 at c=1 ≤ classic echo p50 + store p50 + ${READ_P50_MARGIN_MS} ms`,
      measured: `${ms(w.p50Ms)} vs ${ms(b.p50Ms)} + ${ms(s.p50Ms)} + ${READ_P50_MARGIN_MS} = ${ms(bound)} (${pct(w.p50Ms / bound)} of the bound)`,
      met: w.p50Ms <= bound,
    });
  }
  for (const op of READ_OPS) {
    const w = worker(op, 64);
    const b = classic(64);
    const s = store(STORE_OP_OF[op], 64);
    if (w === undefined || b === undefined || s === undefined) continue;
    const limit = Math.min(b.throughput, s.throughput);
    const ratio = w.throughput / limit;
    checks.push({
      target: `${op} at c=64 ≥ ${pct(READ_SHARE)} of min(classic echo, store ${STORE_OP_OF[op]})`,
      measured: `${fmt(w.throughput)}/s of ${fmt(limit)}/s (${b.throughput <= s.throughput ? 'classic echo' : 'store'}) = ${pct(ratio)}`,
      met: Number.isFinite(ratio) && ratio >= READ_SHARE,
    });
  }
  const enabled = worker('get_pushrule_enabled', 64);
  const cpu = enabled === undefined ? Number.NaN : workerMicrosPerRequest(enabled);
  if (enabled !== undefined && Number.isFinite(cpu)) {
    checks.push({
      target: `worker CPU per get_pushrule_enabled at c=64 ≤ ${WORKER_CPU_TARGET_US} µs`,
      measured: `${fmt(cpu)} µs (${pct(cpu / WORKER_CPU_TARGET_US)} of ${WORKER_CPU_TARGET_US} µs)`,
      met: cpu <= WORKER_CPU_TARGET_US,
    });
  }
  for (const op of WRITE_OPS) {
    const reference = WRITE_REFERENCE_RATIOS[op];
    const w = worker(op, 64);
    const s = store(STORE_OP_OF[op], 64);
    if (reference === undefined || w === undefined || s === undefined) continue;
    const ratio = w.throughput / s.throughput;
    checks.push({
      target: `${op} at c=64 ÷ store ${STORE_OP_OF[op]} ≥ ${pct(WRITE_NOISE)} of ${reference.toFixed(2)} (issue 6 run)`,
      measured: `${fmt(w.throughput)}/s ÷ ${fmt(s.throughput)}/s = ${ratio.toFixed(2)} (${pct(ratio / reference)} of ${reference.toFixed(2)})`,
      met: Number.isFinite(ratio) && ratio >= reference * WRITE_NOISE,
    });
  }
  return checks;
}

/** The results as markdown: one table per group, ratios to the run's own baselines, then the targets. */
export function markdown(
  results: readonly ScenarioResult[],
  checks: readonly TargetCheck[],
  peaks: readonly RssPeak[],
  extraSections?: string,
): string {
  const lines: string[] = [];
  const echoAt = (c: number) => find(results, { group: 'broker', op: 'echo', concurrency: c });
  const classicEchoAt = (c: number) => find(results, { group: 'broker', op: 'echo-classic', concurrency: c });
  const storeAt = (op: string, c: number) => find(results, { group: 'store', op, concurrency: c });
  const cpu = (r: ScenarioResult) =>
    Object.entries(r.cpu)
      .map(([name, value]) => `${name} ${Math.round(value)}`)
      .join(', ');
  const cpuPerRequest = (r: ScenarioResult) => fmt(cpuMicrosPerRequest(r));

  lines.push(
    '### Baselines',
    '',
    '| limit | c | req/s | p50 ms | p99 ms | errors | CPU µs/req | CPU % (per process) |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of results.filter((x) => x.group === 'broker' || x.group === 'store')) {
    const limit =
      r.group === 'store'
        ? `store ${r.op}`
        : r.op === 'echo-classic'
          ? 'broker (echo consumer, classic queue)'
          : 'broker (echo consumer, quorum queue)';
    lines.push(
      `| ${limit} | ${r.concurrency} | ${fmt(r.throughput)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.errors} | ${cpuPerRequest(r)} | ${cpu(r)} |`,
    );
  }

  lines.push(
    '',
    '### Worker',
    '',
    '| op | workers | c | req/s | ÷ broker | ÷ store | p50 ms | p99 ms | errors | CPU µs/req | worker µs/req | CPU % (per process) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of results.filter((x) => x.group === 'worker')) {
    // Reads travel on the read queue (classic) unless the row says otherwise; writes on the request queue (quorum).
    const onReadQueue = READ_OPS.includes(r.op as WorkerOp);
    const b = (onReadQueue ? classicEchoAt(r.concurrency) : undefined) ?? echoAt(r.concurrency);
    const storeOp = r.op in STORE_OP_OF ? STORE_OP_OF[r.op as WorkerOp] : undefined;
    const s = storeOp === undefined ? undefined : storeAt(storeOp, r.concurrency);
    lines.push(
      `| ${r.op} | ${r.workers} | ${r.concurrency} | ${fmt(r.throughput)} | ${ratio(r.throughput, b?.throughput)} | ${ratio(r.throughput, s?.throughput)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.errors} | ${cpuPerRequest(r)} | ${fmt(workerMicrosPerRequest(r))} | ${cpu(r)} |`,
    );
  }

  const gateway = results.filter((x) => x.group === 'gateway');
  if (gateway.length > 0) {
    lines.push(
      '',
      '### Gateway (1 worker, c=64): HTTP through the gateway next to direct RPC',
      '',
      '| op | path | req/s | HTTP ÷ RPC | p50 ms | p99 ms | errors | CPU µs/req | CPU % (per process) |',
      '|---|---|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const r of gateway) {
      const [op = r.op, path = ''] = r.op.split(' ');
      const rpc = find(results, { group: 'gateway', op: `${op} rpc`, concurrency: r.concurrency });
      lines.push(
        `| ${op} | ${path} | ${fmt(r.throughput)} | ${path === 'http' ? ratio(r.throughput, rpc?.throughput) : ''} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.errors} | ${cpuPerRequest(r)} | ${cpu(r)} |`,
      );
    }
  }

  lines.push(
    '',
    '### Growth (set_pushrule_enabled, 1 worker, c=64)',
    '',
    '| user rules | users | req/s | ÷ first row | p50 ms | p99 ms | errors | worker RSS |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  const growth = results.filter((x) => x.group === 'growth');
  const byRules = growth.filter((r) => r.id.startsWith('growth/rules'));
  const byUsers = growth.filter((r) => r.id.startsWith('growth/users'));
  for (const rows of [byRules, byUsers]) {
    const first = rows[0];
    for (const r of rows) {
      lines.push(
        `| ${r.userRules} | ${r.users} | ${fmt(r.throughput)} | ${ratio(r.throughput, first?.throughput)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.errors} | ${r.workerRssBytes === undefined ? '–' : mb(r.workerRssBytes)} |`,
      );
    }
  }

  lines.push(
    '',
    '### Worker memory (kernel high-water mark of each worker process)',
    '',
    '| scenarios run | peak RSS |',
    '|---|---:|',
  );
  for (const peak of peaks) lines.push(`| ${peak.ran} | ${mb(peak.bytes)} |`);

  if (extraSections !== undefined) lines.push('', extraSections);
  lines.push(targetsTable(checks));
  return lines.join('\n');
}

/** The targets table, with its heading. */
export function targetsTable(checks: readonly TargetCheck[]): string {
  const lines = ['', '### Targets', '', '| target | measured | met |', '|---|---|---|'];
  for (const check of checks)
    lines.push(
      `| ${check.target} | ${check.measured} | ${check.unjudged === true ? 'not measured' : check.met ? 'yes' : '**no**'} |`,
    );
  return lines.join('\n');
}

/** CPU time the worker processes spent per answered request, in µs. */
export function workerMicrosPerRequest(r: ScenarioResult): number {
  const worker = Object.entries(r.cpu)
    .filter(([name]) => name.startsWith('worker'))
    .reduce((sum, [, value]) => sum + (Number.isFinite(value) ? value : 0), 0);
  return r.throughput === 0 ? Number.NaN : ((worker / 100) * 1e6) / r.throughput;
}

/** CPU time all watched processes spent per answered request, in µs: what the machine's cores are divided by. */
export function cpuMicrosPerRequest(r: ScenarioResult): number {
  const total = Object.values(r.cpu).reduce((sum, value) => sum + (Number.isFinite(value) ? value : 0), 0);
  return r.throughput === 0 ? Number.NaN : ((total / 100) * 1e6) / r.throughput;
}

const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
const pct = (n: number) => `${Math.round(n * 100)}%`;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const ratio = (value: number, base: number | undefined) =>
  base === undefined || base === 0 ? '–' : (value / base).toFixed(2);
