/**
 * The `evaluate` kernel in process: the project's evaluator on the steering
 * team's evaluate-bench rows (test/fixtures/evaluate-bench/), timed as
 * Synapse's evaluator was timed on them. No broker, no store, no JSON
 * parsing of the request: rulesets are compiled before timing (a warm
 * cache, as Synapse's were built outside its timed loop), then one sample
 * is the whole row: for each event, prepare it and evaluate every recipient
 * into a reply (`evaluateRequest`, explain off).
 *
 *   node --import tsx bench/evaluate-kernel.ts [--only RE] [--seconds N] [--min-samples N] [--profile]
 *
 * --profile writes a V8 CPU profile of the measured samples to
 * bench/results/profiles/ (open it in Chrome DevTools).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import * as os from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { evaluateRequest } from '../src/evaluation/evaluate-request.js';
import type { CompiledRuleset } from '../src/evaluation/compiled-ruleset.js';
import { compileRowRulesets, loadWorkload, type WorkloadRow } from '../test/support/evaluate-bench-fixtures.js';

/**
 * Synapse 1.163.2 on the same rows, "with evaluator construction", median
 * µs per pair (evaluate-bench README, figures of 2026-11-23, 2-core AMD EPYC
 * KVM guest). The target is a fifth of each.
 */
export const SYNAPSE_US_PER_PAIR: Readonly<Record<string, number>> = {
  defaults: 10.04,
  rules10: 27.5,
  rules100: 173,
  rules1000: 501,
  globs10: 921,
  globs100: 18_852,
  mentions: 5.7,
  encrypted_dm: 18.6,
};
const TARGET_FRACTION = 1 / 5;

export interface KernelOptions {
  /** Rows whose name matches; all when absent. */
  readonly only?: RegExp;
  /** Keep sampling a row until its samples add up to this (after `minSamples`). */
  readonly sampleMs?: number;
  readonly minSamples?: number;
  readonly maxSamples?: number;
  /** Unmeasured runs of a row before its samples: at least this many, and at least `warmupMs`. */
  readonly warmupRuns?: number;
  readonly warmupMs?: number;
}

export interface KernelRowResult {
  readonly row: string;
  readonly events: number;
  readonly recipients: number;
  readonly pairs: number;
  /** Whole-row times in ms, in the order measured. */
  readonly samplesMs: readonly number[];
  readonly usPerPairMedian: number;
  readonly usPerPairMin: number;
  readonly synapseUsPerPair: number | undefined;
  readonly targetUsPerPair: number | undefined;
  /** Distinct compiled rulesets of the row, their summed size estimate, and the heap they were measured to add. */
  readonly rulesets: number;
  readonly estimatedBytes: number;
  readonly measuredBytes: number | undefined;
}

/** Nearest-rank median. */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length / 2) - 1] ?? Number.NaN;
}

function runRow(row: WorkloadRow, rulesetFor: ReturnType<typeof compileRowRulesets>): number {
  const started = performance.now();
  for (const { event, room } of row.events) evaluateRequest({ event, room, recipients: row.recipients }, rulesetFor);
  return performance.now() - started;
}

/** A `gc()` without starting Node with --expose-gc, for the heap measurement only. */
function garbageCollector(): (() => void) | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    return vm.runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

/** Compiles the row's rulesets, measuring the heap they add when a collector is at hand. */
function compileMeasured(row: WorkloadRow): {
  rulesetFor: ReturnType<typeof compileRowRulesets>;
  measuredBytes: number | undefined;
} {
  const gc = garbageCollector();
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const rulesetFor = compileRowRulesets(row);
  gc?.();
  const measured = process.memoryUsage().heapUsed - before;
  return { rulesetFor, measuredBytes: gc === undefined ? undefined : measured };
}

export function runEvaluateKernel(options: KernelOptions = {}): KernelRowResult[] {
  const { sampleMs = 2000, minSamples = 5, maxSamples = 500, warmupRuns = 3, warmupMs = 300 } = options;
  const workload = loadWorkload();
  const results: KernelRowResult[] = [];
  for (const row of workload.rows) {
    if (options.only !== undefined && !options.only.test(row.name)) continue;
    const { rulesetFor, measuredBytes } = compileMeasured(row);
    const distinct = new Set<CompiledRuleset>(row.recipients.map((recipient, index) => rulesetFor(recipient, index)));
    const estimatedBytes = [...distinct].reduce((sum, ruleset) => sum + ruleset.estimatedBytes, 0);

    const warmupStarted = performance.now();
    for (let run = 0; run < warmupRuns || performance.now() - warmupStarted < warmupMs; run += 1)
      runRow(row, rulesetFor);

    const samplesMs: number[] = [];
    let total = 0;
    while (samplesMs.length < maxSamples && (samplesMs.length < minSamples || total < sampleMs)) {
      const sample = runRow(row, rulesetFor);
      samplesMs.push(sample);
      total += sample;
    }
    const pairs = row.events.length * row.recipients.length;
    const synapse = SYNAPSE_US_PER_PAIR[row.name];
    results.push({
      row: row.name,
      events: row.events.length,
      recipients: row.recipients.length,
      pairs,
      samplesMs,
      usPerPairMedian: (median(samplesMs) * 1000) / pairs,
      usPerPairMin: (Math.min(...samplesMs) * 1000) / pairs,
      synapseUsPerPair: synapse,
      targetUsPerPair: synapse === undefined ? undefined : synapse * TARGET_FRACTION,
      rulesets: distinct.size,
      estimatedBytes,
      measuredBytes,
    });
  }
  return results;
}

const us = (value: number | undefined) =>
  value === undefined
    ? '–'
    : value >= 100
      ? value.toFixed(0)
      : value >= 10
        ? value.toFixed(1)
        : value >= 1
          ? value.toFixed(2)
          : value.toFixed(3);
const kb = (bytes: number | undefined) => (bytes === undefined ? '–' : `${(bytes / 1024).toFixed(0)} KiB`);

export function kernelMarkdown(results: readonly KernelRowResult[]): string {
  const lines = [
    '| row | pairs | samples | µs/pair (median) | µs/pair (min) | Synapse µs/pair | target ≤ | Synapse ÷ ours | met |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of results) {
    const ratio = r.synapseUsPerPair === undefined ? '–' : `${(r.synapseUsPerPair / r.usPerPairMedian).toFixed(0)}×`;
    const met = r.targetUsPerPair === undefined ? '–' : r.usPerPairMedian <= r.targetUsPerPair ? 'yes' : '**no**';
    lines.push(
      `| \`${r.row}\` | ${r.pairs.toLocaleString('en')} | ${r.samplesMs.length} | ${us(r.usPerPairMedian)} | ${us(r.usPerPairMin)} | ${us(r.synapseUsPerPair)} | ${us(r.targetUsPerPair)} | ${ratio} | ${met} |`,
    );
  }
  lines.push(
    '',
    '| row | distinct compiled rulesets | estimated size | heap growth of decoding and compiling the row (shared matchers included) |',
    '|---|---:|---:|---:|',
  );
  for (const r of results)
    lines.push(`| \`${r.row}\` | ${r.rulesets} | ${kb(r.estimatedBytes)} | ${kb(r.measuredBytes)} |`);
  return lines.join('\n');
}

async function profiled<T>(run: () => T): Promise<{ result: T; profile: unknown }> {
  const session = new Session();
  session.connect();
  const post = async (method: string): Promise<unknown> =>
    new Promise((resolve, reject) => {
      session.post(method, (error, answer) => {
        if (error === null) resolve(answer);
        else reject(error);
      });
    });
  await post('Profiler.enable');
  await post('Profiler.start');
  const result = run();
  const { profile } = (await post('Profiler.stop')) as { profile: unknown };
  session.disconnect();
  return { result, profile };
}

async function main(): Promise<void> {
  const { values: flags } = parseArgs({
    options: {
      only: { type: 'string' },
      seconds: { type: 'string' },
      'min-samples': { type: 'string' },
      profile: { type: 'boolean', default: false },
    },
  });
  const options: KernelOptions = {
    ...(flags.only === undefined ? {} : { only: new RegExp(flags.only) }),
    ...(flags.seconds === undefined ? {} : { sampleMs: Number(flags.seconds) * 1000 }),
    ...(flags['min-samples'] === undefined ? {} : { minSamples: Number(flags['min-samples']) }),
  };
  console.error(
    `evaluate kernel: ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} CPUs, Node ${process.version}, load ${os.loadavg()[0]?.toFixed(2) ?? '?'}`,
  );
  let results: KernelRowResult[];
  if (flags.profile) {
    const { result, profile } = await profiled(() => runEvaluateKernel(options));
    results = result;
    const directory = fileURLToPath(new URL('./results/profiles/', import.meta.url));
    mkdirSync(directory, { recursive: true });
    const file = `${directory}evaluate-kernel-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`;
    writeFileSync(file, JSON.stringify(profile));
    console.error(`profile written to ${file}`);
  } else {
    results = runEvaluateKernel(options);
  }
  console.log(kernelMarkdown(results));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
