import { describe, expect, it } from 'vitest';
import { counterDelta, parseEvaluateCounters, recipientsOf, runOpenLoop } from '../../bench/support/evaluate-load.js';
import { heapGrowth, summarizeHeapSnapshot } from '../../bench/support/inspector.js';

// The evaluate bench's load and what it reads off the workers; its report
// and targets are in evaluate-bench.test.ts.

describe('parseEvaluateCounters', () => {
  const text = [
    '# HELP push_worker_evaluate_cache_hits_total Recipients whose compiled rules came from the cache.',
    '# TYPE push_worker_evaluate_cache_hits_total counter',
    'push_worker_evaluate_cache_hits_total 9000',
    'push_worker_evaluate_cache_misses_total 1000',
    'push_worker_evaluate_cache_entries 10000',
    'push_worker_requests_total{op="evaluate",outcome="ok"} 4',
    'push_worker_requests_in_flight 2',
  ].join('\n');

  it('reads the evaluate counters and gauges, 0 for those absent', () => {
    expect(parseEvaluateCounters(text)).toMatchObject({
      hits: 9000,
      misses: 1000,
      entries: 10_000,
      storeQueries: 0,
      inFlight: 2,
    });
  });

  it('subtracts one reading from another', () => {
    const before = parseEvaluateCounters(text);
    const after = { ...before, hits: 19_000 };
    expect(counterDelta(before, after)).toMatchObject({ hits: 10_000, misses: 0 });
  });
});

describe('recipientsOf', () => {
  it('names distinct members from an offset, each with a display name', () => {
    expect(recipientsOf('p', 2, 5)).toEqual([
      { user_id: '@p-5:bench.example.org', display_name: 'Member 5' },
      { user_id: '@p-6:bench.example.org', display_name: 'Member 6' },
    ]);
  });
});

describe('runOpenLoop', () => {
  it('sends on a fixed schedule whatever the replies do, and counts only the measured window', async () => {
    const clock = { now: 0 };
    const pending: (() => void)[] = [];
    const result = await runOpenLoop({
      ratePerSecond: 10,
      durationMs: 1000,
      measureFromMs: 200,
      measureToMs: 700,
      now: () => clock.now,
      sleep: async (ms) => {
        clock.now += ms;
        return Promise.resolve();
      },
      // Replies come only once everything was sent: a closed loop would have sent one request.
      call: async (i) =>
        new Promise<void>((resolve, reject) => {
          pending.push(() => {
            if (i === 3) reject(new Error('boom'));
            else resolve();
          });
          if (i === 9) {
            clock.now += 50;
            for (const settle of pending) settle();
          }
        }),
    });
    expect(result).toMatchObject({
      sent: 5,
      answered: 4,
      errors: 1,
      firstError: 'boom',
      maxInFlight: 10,
      maxSendLagMs: 0,
    });
    // Requests 2, 4, 5 and 6 (3 failed), sent at 200, 400, 500 and 600 ms, all answered at 950 ms.
    expect(result.maxMs).toBe(750);
    expect(result.p50Ms).toBe(450);
  });
});

describe('summarizeHeapSnapshot and heapGrowth', () => {
  const snapshot = (extraStrings: number) => ({
    snapshot: {
      meta: {
        node_fields: ['type', 'name', 'id', 'self_size', 'edge_count'],
        node_types: [['hidden', 'object', 'string', 'number']],
      },
    },
    strings: ['', 'Object', 'some text', 'Map'],
    nodes: [
      ...[1, 1, 1, 48, 0],
      ...[1, 3, 2, 32, 0],
      ...Array.from({ length: extraStrings }, (_, k) => [2, 2, 10 + k, 40, 0]).flat(),
      ...[3, 0, 99, 16, 0],
    ],
  });

  it('sums own sizes by kind, strings and numbers as one kind each', () => {
    const summary = summarizeHeapSnapshot(snapshot(2));
    expect(summary.get('object Object')).toEqual({ count: 1, bytes: 48 });
    expect(summary.get('(string)')).toEqual({ count: 2, bytes: 80 });
    expect(summary.get('(heap number)')).toEqual({ count: 1, bytes: 16 });
  });

  it('lists what grew, largest first, the rest in one row', () => {
    const rows = heapGrowth(summarizeHeapSnapshot(snapshot(1)), summarizeHeapSnapshot(snapshot(4)), 1);
    expect(rows[0]).toEqual({ kind: '(string)', count: 3, bytes: 120 });
    expect(rows[1]).toEqual({ kind: '(3 other kinds)', count: 0, bytes: 0 });
  });
});
