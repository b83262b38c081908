import { describe, expect, it } from 'vitest';
import {
  checkCoalescedTargets,
  coalescedMarkdown,
  type CoalescedResults,
  type CoalescedRow,
} from '../../bench/support/evaluate-coalesced-report.js';

function aRow(overrides: Partial<CoalescedRow> = {}): CoalescedRow {
  return {
    row: 'defaults',
    mode: 'alone',
    concurrency: 1,
    recipients: 200,
    requests: 1_000,
    throughput: 1_000,
    p50Ms: 1,
    p99Ms: 2,
    errors: 0,
    eventsPerMessage: 1,
    ...overrides,
  };
}

const results = (rows: CoalescedRow[]): CoalescedResults => ({ rows, answers: { right: 10, checked: 10, wrong: [] } });
const judged = (rows: CoalescedRow[], about: string) =>
  checkCoalescedTargets(results(rows), undefined)
    .filter((c) => c.target.includes(about))
    .map((c) => [c.target, c.met]);

describe('the evaluate rows at c = 1 against the echo of the same bodies (issue 35)', () => {
  it.each<[string, number, boolean]>([
    ['1.5 × the echo', 1_000, true],
    ['just over', 999, false],
  ])('judges each row alone at c = 1 ÷ its echo ≤ 1.5: %s', (_, throughput, met) => {
    const rows = [aRow({ mode: 'echo', throughput: 1_500 }), aRow({ throughput })];
    expect(judged(rows, 'echo of the same bodies')).toEqual([
      ['evaluate `defaults`, c = 1: µs per pair ÷ the echo of the same bodies ≤ 1.5', met],
    ]);
  });

  it('fails a row that had errors, and judges nothing without an echo row', () => {
    expect(
      judged([aRow({ mode: 'echo', throughput: 1_000 }), aRow({ errors: 1 })], 'echo of the same bodies')[0]?.[1],
    ).toBe(false);
    expect(judged([aRow()], 'echo of the same bodies')).toEqual([]);
  });

  it('shows the ratio to the echo on the row alone at c = 1 only', () => {
    const md = coalescedMarkdown(
      results([
        aRow({ mode: 'echo', throughput: 2_000 }),
        aRow(),
        aRow({ mode: 'coalesced', concurrency: 8, throughput: 3_000 }),
      ]),
      undefined,
    );
    const cells = md
      .split('\n')
      .filter((l) => l.startsWith('| `defaults`'))
      .map((l) => l.split('|')[10]?.trim());
    expect(cells).toEqual(['–', '2.00', '–']);
  });
});

describe('the coalesced rows against Synapse', () => {
  it('judges c = 8 coalesced against the README figure when Synapse did not run in this run', () => {
    // defaults: 10.04 µs per pair in the README; 200 recipients at 500 events/s is 10 µs per pair.
    const checks = judged([aRow({ mode: 'coalesced', concurrency: 8, throughput: 500 })], 'Synapse');
    expect(checks).toEqual([['evaluate/coalesced `defaults`, c = 8: µs per pair ÷ Synapse in process ≤ 1', true]]);
  });
});
