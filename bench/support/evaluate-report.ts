/** The evaluate part's results, the figures derived from them, and the targets they are checked against (the markdown: evaluate-markdown.ts). */
import { checkCoalescedTargets, type CoalescedResults } from './evaluate-coalesced-report.js';
import type { KernelRowResult } from '../evaluate-kernel.js';
import type { LatencyRow } from './latency-row.js';
import type { EvaluateCounters, OpenLoopResult } from './evaluate-load.js';
import type { HeapGrowthRow, MemoryFigures } from './inspector.js';
import type { TargetCheck } from './report.js';
import { FANOUT_ECHO_RATIO_TARGET, fanoutVsEcho } from './fanout-vs-echo.js';
import type { SynapseRun } from './synapse-anchor.js';
import { mb, ms, us } from './evaluate-figures.js';

/** Ours ÷ Synapse's "with evaluator construction" median, per row, at most this (issue 14). */
export const KERNEL_RATIO_TARGET = 0.2;
/** Issue 23 (issue 14's were 10 and 50 ms). */
export const WARM_P99_TARGET_MS: Readonly<Record<number, number>> = { 1000: 5, 10_000: 25 };
export const COLD_P99_TARGET_MS = 500;
/** Issue 23: a cold request reads its users at ≥ this fraction of the store's own bulk-read rate (same run). */
export const COLD_STORE_RATE_TARGET = 0.5;
/** Issue 23 (issue 14's was 2). */
export const ISOLATION_RATIO_TARGET = 1.5;
export const MEMORY_GROWTH_TARGET_BYTES = 30 * 1024 * 1024;

export interface KernelVsSynapseRow {
  readonly row: string;
  readonly pairs: number;
  readonly oursUsPerPair: number;
  readonly oursSamples: number;
  readonly synapseUsPerPair: number | undefined;
  readonly synapseSamples: number | undefined;
  /** Ours ÷ Synapse; undefined when Synapse was not measured. */
  readonly ratio: number | undefined;
}

/** The kernel's rows next to Synapse's rows of the same run, matched by name. */
export function kernelVsSynapse(kernel: readonly KernelRowResult[], synapse: SynapseRun): KernelVsSynapseRow[] {
  return kernel.map((k) => {
    const s = synapse.measured ? synapse.rows.find((r) => r.row === k.row) : undefined;
    return {
      row: k.row,
      pairs: k.pairs,
      oursUsPerPair: k.usPerPairMedian,
      oursSamples: k.samplesMs.length,
      synapseUsPerPair: s?.usPerPairWithSetup,
      synapseSamples: s?.samples,
      ratio: s === undefined ? undefined : k.usPerPairMedian / s.usPerPairWithSetup,
    };
  });
}

export interface LoopSummary {
  readonly ops: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly cpu: Readonly<Record<string, number>>;
}

export interface IsolationResult {
  /** Users `get_pushrule_enabled` is spread over, each with stored rules (the collection's only documents). */
  readonly users: number;
  /** The case the target is judged on (1,000 users); the other is a diagnostic. */
  readonly judged: boolean;
  readonly concurrency: number;
  /** `get_pushrule_enabled` alone, right before the evaluates. */
  readonly before: LoopSummary;
  /** The same while the sender's evaluates arrive. */
  readonly loaded: LoopSummary;
  /** Alone again, right after: how much the baseline drifted. */
  readonly after: LoopSummary;
  readonly sender: OpenLoopResult;
  readonly senderRecipients: number;
  /** What the worker's evaluate counters did during the loaded phase. */
  readonly evaluateCounters: EvaluateCounters;
}

export interface MemorySample extends MemoryFigures {
  readonly cacheEntries: number;
  readonly cacheBytes: number;
}

export interface MemoryResult {
  /** Users newly cached between the two samples. */
  readonly users: number;
  readonly before: MemorySample;
  readonly after: MemorySample;
  readonly method: string;
  /** Heap growth by kind of object, when a heap profile was taken. */
  readonly profile?: {
    readonly users: number;
    readonly heapUsedGrowth: number;
    readonly rows: readonly HeapGrowthRow[];
  };
}

export function memoryGrowth(memory: MemoryResult): {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  malloced: number;
  perUserRss: number;
  perUserHeap: number;
  perUserEstimate: number;
} {
  const { before, after, users } = memory;
  const heapUsed = after.heapUsed - before.heapUsed;
  return {
    rss: after.rssBytes - before.rssBytes,
    heapUsed,
    heapTotal: after.heapTotal - before.heapTotal,
    external: after.external - before.external,
    malloced: after.mallocedMemory - before.mallocedMemory,
    perUserRss: (after.rssBytes - before.rssBytes) / users,
    perUserHeap: heapUsed / users,
    perUserEstimate: (after.cacheBytes - before.cacheBytes) / Math.max(1, after.cacheEntries - before.cacheEntries),
  };
}

/** One row of the `mentions` workload end to end, or the classic echo's round trip of the same bodies. */
export interface MentionsRow {
  readonly id: string;
  readonly concurrency: number;
  /** (event, recipient) pairs per request. */
  readonly pairs: number;
  readonly requests: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
}

/** Wall-clock µs per (event, recipient) pair: what the loop's throughput costs each pair. */
export function usPerPair(row: Pick<MentionsRow, 'throughput' | 'pairs'>): number {
  return row.throughput > 0 ? 1e6 / (row.throughput * row.pairs) : Number.NaN;
}

export interface EvaluateResults {
  readonly cpus: number;
  readonly loadAverageAtStart: readonly number[];
  readonly kernel?: readonly KernelRowResult[];
  readonly synapse?: SynapseRun;
  readonly kernelLoadAverage?: number;
  readonly latency: readonly LatencyRow[];
  readonly isolation: readonly IsolationResult[];
  readonly memory?: MemoryResult;
  readonly mentions?: readonly MentionsRow[];
  /** Every workload row end to end, calls coalesced (issue 35). */
  readonly coalesced?: CoalescedResults;
  /** What each part of the run means, for the report. */
  readonly notes: readonly string[];
}

/** Loaded p99 ÷ alone p99; infinite when nothing was answered under load. */
export function isolationRatio(isolation: Pick<IsolationResult, 'before' | 'loaded'>): number {
  if (isolation.loaded.ops === 0) return Number.POSITIVE_INFINITY;
  return isolation.loaded.p99Ms / isolation.before.p99Ms;
}

export function checkEvaluateTargets(e: EvaluateResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  if (e.kernel !== undefined && e.synapse !== undefined) {
    const synapse = e.synapse;
    for (const r of kernelVsSynapse(e.kernel, synapse)) {
      const target = `evaluate kernel \`${r.row}\`: ours ≤ ${KERNEL_RATIO_TARGET} × Synapse (with evaluator construction), same run`;
      if (r.ratio === undefined || r.synapseUsPerPair === undefined) {
        checks.push({
          target,
          measured: `${us(r.oursUsPerPair)} µs/pair; Synapse not measured: ${synapse.measured ? 'no such row' : synapse.reason}`,
          met: false,
          unjudged: true,
        });
      } else {
        checks.push({
          target,
          measured: `${us(r.oursUsPerPair)} vs ${us(r.synapseUsPerPair)} µs/pair = ${r.ratio.toFixed(3)}`,
          met: r.ratio <= KERNEL_RATIO_TARGET,
        });
      }
    }
  }
  if (e.coalesced !== undefined) checks.push(...checkCoalescedTargets(e.coalesced, e.synapse));
  for (const row of e.latency) {
    if (row.targetP99Ms === undefined) continue;
    checks.push({
      target: `evaluate ${row.what}, ${row.recipients.toLocaleString('en-US')} recipients: p99 ≤ ${row.targetP99Ms} ms`,
      measured:
        row.samples === 0 ? 'no samples' : `p99 ${ms(row.p99Ms)} ms (p50 ${ms(row.p50Ms)}, ${row.samples} requests)`,
      met: row.samples > 0 && row.errors === 0 && row.p99Ms <= row.targetP99Ms,
    });
  }
  const fanout = fanoutVsEcho(e.latency);
  if (fanout !== undefined) {
    const { warm, grouped, plain, ratio } = fanout;
    const plainRatio =
      plain === undefined
        ? ''
        : `; the plain list's echo p99 ${ms(plain.p99Ms)} ms: ${(warm.p99Ms / plain.p99Ms).toFixed(2)}`;
    checks.push({
      target: `evaluate cache warm, 10,000 recipients: p99 ≤ ${FANOUT_ECHO_RATIO_TARGET} × the echo's p99 of the body the client sends, same run (issue 35)`,
      measured: `${ms(warm.p99Ms)} ÷ ${ms(grouped.p99Ms)} ms = ${ratio.toFixed(2)}${plainRatio}`,
      met: warm.errors === 0 && ratio <= FANOUT_ECHO_RATIO_TARGET,
    });
  }
  const storeRate = coldVsStore(e.latency);
  if (storeRate !== undefined) {
    checks.push({
      target: `evaluate cache cold, stored rules, 10,000 recipients: ≥ ${COLD_STORE_RATE_TARGET} × the store's own bulk-read rate for the same documents (same run)`,
      measured: `store ${ms(storeRate.storeMs)} ms ÷ evaluate ${ms(storeRate.coldMs)} ms (p50s) = ${storeRate.ratio.toFixed(2)}`,
      met: storeRate.ratio >= COLD_STORE_RATE_TARGET,
    });
  }
  for (const isolation of e.isolation.filter((i) => i.judged)) {
    const { before, loaded, sender, concurrency, senderRecipients } = isolation;
    const ratio = isolationRatio(isolation);
    checks.push({
      target: `get_pushrule_enabled p99 at c=${concurrency} with ${sender.ratePerSecond} evaluates/s of ${senderRecipients.toLocaleString('en-US')} recipients ≤ ${ISOLATION_RATIO_TARGET}× without`,
      measured:
        loaded.ops === 0
          ? `no get_pushrule_enabled answered within the measured window (alone: p99 ${ms(before.p99Ms)} ms); evaluates p50 ${ms(sender.p50Ms)} ms, ${sender.errors} of ${sender.sent} failed`
          : `${ms(loaded.p99Ms)} vs ${ms(before.p99Ms)} ms = ${ratio.toFixed(2)}×`,
      met: ratio <= ISOLATION_RATIO_TARGET && loaded.errors === 0 && sender.errors === 0,
    });
  }
  if (e.memory !== undefined) {
    const growth = memoryGrowth(e.memory);
    checks.push({
      target: `worker RSS growth with ${e.memory.users.toLocaleString('en-US')} more cached users on default rules ≤ 30 MB`,
      measured: `${mb(growth.rss)} (${Math.round(growth.perUserRss)} B/user; heap ${mb(growth.heapUsed)})`,
      met: growth.rss <= MEMORY_GROWTH_TARGET_BYTES,
    });
  }
  return checks;
}

/** The cold stored row against the store's bulk read of the same documents: the rate ratio (store time ÷ evaluate time, p50s). */
export function coldVsStore(
  latency: readonly LatencyRow[],
): { readonly coldMs: number; readonly storeMs: number; readonly ratio: number } | undefined {
  const cold = latency.find((r) => r.id.startsWith('evaluate/cold/stored/'));
  const store = latency.find((r) => r.id.startsWith('store/loadMany/stored/'));
  if (cold === undefined || store === undefined || cold.samples === 0 || store.samples === 0) return undefined;
  return { coldMs: cold.p50Ms, storeMs: store.p50Ms, ratio: store.p50Ms / cold.p50Ms };
}
