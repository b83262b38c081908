import { describe, expect, it } from 'vitest';
import type { KernelRowResult } from '../../bench/evaluate-kernel.js';
import { evaluateMarkdown, issue23Markdown } from '../../bench/support/evaluate-markdown.js';
import {
  checkEvaluateTargets,
  isolationRatio,
  kernelVsSynapse,
  memoryGrowth,
  type EvaluateResults,
  type IsolationResult,
  type LoopSummary,
  type MemoryResult,
  type MemorySample,
} from '../../bench/support/evaluate-report.js';
import { latencyRow } from '../../bench/support/latency-row.js';
import { targetsTable } from '../../bench/support/report.js';
import { parseSynapseResults, type SynapseRun } from '../../bench/support/synapse-anchor.js';

// How the bench loads the workers and measures them (counters, recipients,
// the open loop, heap snapshots) is in evaluate-load.test.ts.

const MB = 1024 * 1024;

function kernelRow(row: string, usPerPairMedian: number): KernelRowResult {
  return {
    row,
    events: 10,
    recipients: 10,
    pairs: 100,
    samplesMs: [1, 2, 3, 4, 5],
    usPerPairMedian,
    usPerPairMin: usPerPairMedian,
    synapseUsPerPair: undefined,
    targetUsPerPair: undefined,
    rulesets: 1,
    estimatedBytes: 0,
    measuredBytes: undefined,
  };
}

const synapse: SynapseRun = {
  measured: true,
  synapseVersion: '1.163.2',
  python: '3.11.7',
  loadAverageAtStart: 2,
  repsMin: 5,
  seconds: 100,
  rows: [
    { row: 'defaults', pairs: 100, usPerPairWithSetup: 10, usPerPairRunOnly: 6, samples: 7 },
    { row: 'mentions', pairs: 100, usPerPairWithSetup: 5, usPerPairRunOnly: 5, samples: 7 },
  ],
};

function results(overrides: Partial<EvaluateResults>): EvaluateResults {
  return { cpus: 2, loadAverageAtStart: [1, 1, 1], latency: [], isolation: [], notes: [], ...overrides };
}

describe('parseSynapseResults', () => {
  it('reads the "with evaluator construction" median of each row and counts its samples', () => {
    const parsed = parseSynapseResults({
      synapse_version: '1.163.2',
      python: '3.11.7',
      load_average_at_start: 2.5,
      reps_min: 5,
      rows: [
        {
          row: 'rules10',
          pairs: 2600,
          us_per_pair_run_only: 26.2,
          us_per_pair_with_setup: 27.5,
          samples_ms_with_setup: [1, 2, 3],
        },
      ],
    });
    expect(parsed.rows).toEqual([
      { row: 'rules10', pairs: 2600, usPerPairWithSetup: 27.5, usPerPairRunOnly: 26.2, samples: 3 },
    ]);
    expect(parsed.loadAverageAtStart).toBe(2.5);
  });

  it('refuses a file without rows or a row without its figures', () => {
    expect(() => parseSynapseResults({})).toThrow(/no rows/);
    expect(() => parseSynapseResults({ rows: [{ row: 'x', pairs: 1 }] })).toThrow(/without its figures/);
  });
});

describe('kernelVsSynapse', () => {
  it("divides our median by Synapse's of the same row, and leaves rows Synapse did not run without a ratio", () => {
    const rows = kernelVsSynapse([kernelRow('defaults', 0.5), kernelRow('globs10', 1)], synapse);
    expect(rows[0]).toMatchObject({ row: 'defaults', synapseUsPerPair: 10, ratio: 0.05 });
    expect(rows[1]).toMatchObject({ row: 'globs10', synapseUsPerPair: undefined, ratio: undefined });
  });

  it('has no ratio at all when Synapse was not measured', () => {
    const rows = kernelVsSynapse([kernelRow('defaults', 0.5)], { measured: false, reason: 'no venv' });
    expect(rows[0]?.ratio).toBeUndefined();
  });
});

describe('latencyRow', () => {
  it('gives nearest-rank p50 and p99 and the maximum of the latencies, in any order', () => {
    const row = latencyRow(
      { id: 'x', what: 'y', recipients: 10 },
      Array.from({ length: 200 }, (_, i) => 200 - i),
    );
    expect(row).toMatchObject({ samples: 200, p50Ms: 100, p99Ms: 198, maxMs: 200, errors: 0, excluded: 0 });
  });
});

const loop = (p99Ms: number, ops = 100): LoopSummary => ({
  ops,
  throughput: ops,
  p50Ms: p99Ms / 2,
  p99Ms,
  errors: 0,
  cpu: {},
});

function isolationOf(before: LoopSummary, loaded: LoopSummary): IsolationResult {
  return {
    users: 1000,
    judged: true,
    concurrency: 16,
    before,
    loaded,
    after: before,
    sender: {
      ratePerSecond: 10,
      sent: 30,
      answered: 30,
      errors: 0,
      firstError: undefined,
      p50Ms: 50,
      p99Ms: 90,
      maxMs: 95,
      maxInFlight: 2,
      maxSendLagMs: 1,
    },
    senderRecipients: 10_000,
    evaluateCounters: {
      recipients: 0,
      hits: 0,
      misses: 0,
      storeQueries: 0,
      staleRefreshes: 0,
      evictions: 0,
      entries: 0,
      bytes: 0,
      inFlight: 0,
    },
  };
}

describe('isolationRatio', () => {
  it('is the loaded p99 over the p99 alone, and infinite when nothing was answered under load', () => {
    expect(isolationRatio({ before: loop(10), loaded: loop(20) })).toBe(2);
    expect(isolationRatio({ before: loop(10), loaded: loop(Number.NaN, 0) })).toBe(Number.POSITIVE_INFINITY);
  });
});

const sample = (rssBytes: number, heapUsed: number, cacheEntries: number, cacheBytes: number): MemorySample => ({
  rssBytes,
  heapUsed,
  heapTotal: heapUsed,
  external: 0,
  arrayBuffers: 0,
  mallocedMemory: 0,
  cacheEntries,
  cacheBytes,
});

describe('memoryGrowth', () => {
  it('subtracts before from after and divides by the users cached in between', () => {
    const memory: MemoryResult = {
      users: 100_000,
      before: sample(100 * MB, 20 * MB, 10_000, 1_600_000),
      after: sample(125 * MB, 34 * MB, 110_000, 17_600_000),
      method: '',
    };
    const growth = memoryGrowth(memory);
    expect(growth.rss).toBe(25 * MB);
    expect(growth.perUserRss).toBeCloseTo((25 * MB) / 100_000, 9);
    expect(growth.perUserHeap).toBeCloseTo((14 * MB) / 100_000, 9);
    expect(growth.perUserEstimate).toBe(160);
  });
});

describe('checkEvaluateTargets', () => {
  it('judges each kernel row at a fifth of Synapse, and says when Synapse was not measured', () => {
    const checks = checkEvaluateTargets(
      results({ kernel: [kernelRow('defaults', 2), kernelRow('mentions', 1.01), kernelRow('globs10', 1)], synapse }),
    );
    expect(checks.map((c) => [c.met, c.unjudged ?? false])).toEqual([
      [true, false],
      [false, false],
      [false, true],
    ]);
    expect(checks[2]?.measured).toMatch(/Synapse not measured: no such row/);
    expect(targetsTable(checks)).toMatch(/\| not measured \|$/m);
  });

  it('judges p99 of the rows that have a target, and no row without samples or with errors', () => {
    const rows = [
      latencyRow({ id: 'a', what: 'cache warm', recipients: 1000, targetP99Ms: 10 }, [5, 10]),
      latencyRow({ id: 'b', what: 'cache warm', recipients: 10_000, targetP99Ms: 50 }, [51]),
      latencyRow({ id: 'c', what: 'cache cold', recipients: 10_000, targetP99Ms: 500 }, []),
      latencyRow({ id: 'd', what: 'cache warm', recipients: 1000, targetP99Ms: 10, errors: 1 }, [1]),
      latencyRow({ id: 'e', what: 'steady', recipients: 1000 }, [1000]),
    ];
    expect(checkEvaluateTargets(results({ latency: rows })).map((c) => c.met)).toEqual([true, false, false, false]);
  });

  it('judges isolation at 1.5 times the p99 alone (issue 23), on the judged case only', () => {
    const met = checkEvaluateTargets(results({ isolation: [isolationOf(loop(10), loop(15))] }));
    const missed = checkEvaluateTargets(
      results({ isolation: [isolationOf(loop(10), loop(15.1)), { ...isolationOf(loop(10), loop(5)), judged: false }] }),
    );
    const starved = checkEvaluateTargets(results({ isolation: [isolationOf(loop(10), loop(Number.NaN, 0))] }));
    expect(met.map((c) => c.met)).toEqual([true]);
    expect(missed.map((c) => c.met)).toEqual([false]);
    expect(starved[0]).toMatchObject({
      met: false,
      measured: expect.stringMatching(/no get_pushrule_enabled answered/) as unknown,
    });
  });

  it.each([
    ['at half the rate', 1000, 500, true],
    ['under half the rate', 1000.1, 500, false],
    ['faster than the store alone', 400, 500, true],
  ])("judges a cold request against the store's bulk read of the same documents: %s", (_case, coldMs, storeMs, met) => {
    const checks = checkEvaluateTargets(
      results({
        latency: [
          latencyRow({ id: 'evaluate/cold/stored/10000', what: 'cache cold, stored rules', recipients: 10_000 }, [
            coldMs,
          ]),
          latencyRow({ id: 'store/loadMany/stored/10000', what: 'store', recipients: 10_000 }, [storeMs]),
        ],
      }),
    );
    expect(checks.find((c) => c.target.includes("store's own bulk-read rate"))?.met).toBe(met);
  });

  it("prints issue 23's table: the judged rows, and the mentions row next to the echo's", () => {
    const text = issue23Markdown(
      results({
        latency: [
          latencyRow({ id: 'evaluate/warm/1000', what: 'cache warm', recipients: 1000 }, [2, 5]),
          latencyRow({ id: 'evaluate/warm/10000', what: 'cache warm', recipients: 10_000 }, [20, 26]),
        ],
        isolation: [isolationOf(loop(10), loop(12))],
        mentions: [
          {
            id: 'broker/echo-classic/mentions',
            concurrency: 8,
            pairs: 100,
            requests: 1,
            throughput: 2000,
            p50Ms: 1,
            p99Ms: 2,
            errors: 0,
          },
          {
            id: 'evaluate/mentions',
            concurrency: 1,
            pairs: 100,
            requests: 1,
            throughput: 500,
            p50Ms: 2,
            p99Ms: 3,
            errors: 0,
          },
        ],
      }),
    );
    expect(text).toMatch(/^\| warm, 1,000 recipients, p99 \| 5\.00 ms \(p50 2\.00\) \| ≤ 5 ms \| yes \|$/m);
    expect(text).toMatch(/^\| warm, 10,000 recipients, p99 \| 26\.00 ms \(p50 20\.00\) \| ≤ 25 ms \| \*\*no\*\* \|$/m);
    expect(text).toMatch(/\| 1\.20 × idle \(12\.00 vs 10\.00 ms\) \| ≤ 1\.5 × idle \| yes \|$/m);
    expect(text).toMatch(/^\| broker\/echo-classic\/mentions, c=8 \| 5\.00 µs\/pair .*\| the broker alone \| – \|$/m);
    expect(text).toMatch(
      /^\| evaluate\/mentions, c=1 \| 20\.0 µs\/pair .*\| Synapse in process: 5\.70 µs\/pair \| – \|$/m,
    );
  });

  it('judges RSS growth at 30 MB', () => {
    const memory = (after: number): MemoryResult => ({
      users: 100_000,
      before: sample(100 * MB, 0, 0, 0),
      after: sample(100 * MB + after, 0, 100_000, 0),
      method: '',
    });
    expect(checkEvaluateTargets(results({ memory: memory(30 * MB) }))[0]?.met).toBe(true);
    expect(checkEvaluateTargets(results({ memory: memory(30 * MB + 1) }))[0]?.met).toBe(false);
  });

  it('prints every part it was given', () => {
    const text = evaluateMarkdown(
      results({
        kernel: [kernelRow('defaults', 0.5)],
        synapse,
        latency: [latencyRow({ id: 'evaluate/warm/1000', what: 'cache warm', recipients: 1000 }, [1])],
        isolation: [isolationOf(loop(10), loop(20))],
        memory: {
          users: 100_000,
          before: sample(100 * MB, 0, 0, 0),
          after: sample(120 * MB, 0, 100_000, 0),
          method: 'how',
        },
      }),
    );
    expect(text).toMatch(/^\| `defaults` \| 100 \| 0\.500 \| 5 \| 10\.0 \| 7 \| 0\.0500 \| ≤ 0\.2 \| yes \|$/m);
    expect(text).toMatch(/^\| evaluate\/warm\/1000 \| cache warm \| 1,000 \| 1 \|/m);
    expect(text).toMatch(/2\.00×/);
    expect(text).toMatch(/^\| growth \| \*\*20\.0 MB\*\* \|/m);
  });
});
