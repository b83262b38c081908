import type { EvaluateReply } from '../../src/evaluation/evaluate-request.js';
import type { ExpectedPair } from '../../test/support/evaluate-bench-fixtures.js';
import { SYNAPSE_US_PER_PAIR } from '../evaluate-kernel.js';
import type { TargetCheck } from './report.js';
import type { SynapseRun } from './synapse-anchor.js';

/** One closed loop over a workload row's events (`evaluate/coalesced`). */
export interface CoalescedRow {
  readonly row: string;
  /**
   * `coalesced`: the client's default coalescing; `alone`: `evaluateCoalescing: false`;
   * `echo`: the same bodies as `alone`, to an echo consumer (the transport's floor).
   */
  readonly mode: 'coalesced' | 'alone' | 'echo';
  readonly concurrency: number;
  /** Recipients per event: the (event, recipient) pairs of each call. */
  readonly recipients: number;
  readonly requests: number;
  /** Calls (events) answered per second. */
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  /** Events per message the client sent, warm-up included. */
  readonly eventsPerMessage: number;
}

export interface CoalescedResults {
  readonly rows: readonly CoalescedRow[];
  /** expected.json's pairs answered as it says, of those checked, and the first few that were not. */
  readonly answers: { readonly right: number; readonly checked: number; readonly wrong: readonly string[] };
}

/** Per pair at c = 8 coalesced, ours ÷ Synapse in process (with evaluator construction), on every row. */
export const COALESCED_RATIO_TARGET = 1;
/** Per pair at c = 1, each call alone, ours ÷ the echo of the same bodies, on every row. */
export const FLOOR_RATIO_TARGET = 1.5;

/**
 * Checks each pair of `expected` (one row's) against the replies to that
 * row's events, by `event_index`: notified with exactly those actions (the
 * project's own where expected.json records a known departure), or absent
 * from `notify`.
 */
export function checkAnswers(
  expected: readonly ExpectedPair[],
  replies: readonly Pick<EvaluateReply, 'notify'>[],
): { right: number; checked: number; wrong: string[] } {
  let right = 0;
  const wrong: string[] = [];
  for (const pair of expected) {
    const actions = replies[pair.event_index]?.notify[pair.user_id];
    const notified = pair.known_departure === null ? pair.notified : (pair.project_notified ?? pair.notified);
    const want = pair.known_departure === null ? pair.actions : (pair.project_actions ?? pair.actions);
    const ok = notified ? JSON.stringify(actions) === JSON.stringify(want) : actions === undefined;
    if (ok) right += 1;
    else if (wrong.length < 10)
      wrong.push(`${pair.row}/${pair.event_index}/${pair.user_id}: ${JSON.stringify(actions)}`);
  }
  return { right, checked: expected.length, wrong };
}

/** Wall-clock µs per (event, recipient) pair. */
export function coalescedUsPerPair(row: Pick<CoalescedRow, 'throughput' | 'recipients'>): number {
  return row.throughput > 0 ? 1e6 / (row.throughput * row.recipients) : Number.NaN;
}

/** Synapse's µs per pair on `row`: this run's when the kernel part measured it, else the README's of 2026-11-23. */
export function synapseUsPerPair(
  row: string,
  synapse: SynapseRun | undefined,
): { us: number | undefined; source: string } {
  const measured = synapse?.measured === true ? synapse.rows.find((r) => r.row === row) : undefined;
  if (measured !== undefined) return { us: measured.usPerPairWithSetup, source: 'this run' };
  return { us: SYNAPSE_US_PER_PAIR[row], source: 'README, 2026-11-23' };
}

export function checkCoalescedTargets(results: CoalescedResults, synapse: SynapseRun | undefined): TargetCheck[] {
  const checks: TargetCheck[] = [
    {
      target: 'evaluate/coalesced: every expected.json pair answered right',
      measured: `${results.answers.right.toLocaleString('en-US')} of ${results.answers.checked.toLocaleString('en-US')}${results.answers.wrong.length === 0 ? '' : ` (${results.answers.wrong.join('; ')})`}`,
      met: results.answers.right === results.answers.checked && results.answers.checked > 0,
    },
  ];
  for (const r of results.rows.filter((row) => row.mode === 'alone' && row.concurrency === 1)) {
    const echo = results.rows.find((e) => e.row === r.row && e.mode === 'echo' && e.concurrency === 1);
    if (echo === undefined) continue;
    const ratio = coalescedUsPerPair(r) / coalescedUsPerPair(echo);
    checks.push({
      target: `evaluate \`${r.row}\`, c = 1: µs per pair ÷ the echo of the same bodies ≤ ${FLOOR_RATIO_TARGET}`,
      measured: `${us(coalescedUsPerPair(r))} vs ${us(coalescedUsPerPair(echo))} µs/pair = ${ratio.toFixed(2)}${r.errors > 0 ? `, ${r.errors} errors` : ''}`,
      met: Number.isFinite(ratio) && ratio <= FLOOR_RATIO_TARGET && r.errors === 0,
    });
  }
  for (const r of results.rows.filter((row) => row.mode === 'coalesced' && row.concurrency === 8)) {
    const ours = coalescedUsPerPair(r);
    const s = synapseUsPerPair(r.row, synapse);
    const ratio = s.us === undefined ? undefined : ours / s.us;
    checks.push({
      target: `evaluate/coalesced \`${r.row}\`, c = 8: µs per pair ÷ Synapse in process ≤ ${COALESCED_RATIO_TARGET}`,
      measured:
        ratio === undefined
          ? `${us(ours)} µs/pair; no Synapse figure`
          : `${us(ours)} vs ${us(s.us ?? Number.NaN)} µs/pair = ${ratio.toFixed(2)}${r.errors > 0 ? `, ${r.errors} errors` : ''}`,
      met: ratio !== undefined && ratio <= COALESCED_RATIO_TARGET && r.errors === 0,
      ...(ratio === undefined ? { unjudged: true } : {}),
    });
  }
  return checks;
}

export function coalescedMarkdown(results: CoalescedResults, synapse: SynapseRun | undefined): string {
  const lines = [
    '### Every evaluate-bench row end to end, calls coalesced (issue 35): µs per (event, recipient) pair against Synapse in process',
    '',
    `One worker (one evaluation thread), every row's stored rules seeded, cache warm; \`PushRulesClient.evaluate\` by c callers in a closed loop over the row's events, each call one event to the row's recipients. \`coalesced\`: the client's default coalescing (calls made while a message is out go together, window 0.5 ms, at most 64 events a message); \`alone\`: \`evaluateCoalescing: false\`; \`echo\`: the bodies \`alone\` sends, to an echo consumer on a classic queue with the evaluate queue's prefetch (it answers \`{}\`), measured right before \`alone\` at c = 1. µs/pair = 1 s ÷ (events answered per second × recipients). Answers: ${results.answers.right.toLocaleString('en-US')} of ${results.answers.checked.toLocaleString('en-US')} expected.json pairs right (every event of every row through the coalescing client once).`,
    '',
    '| row | recipients | mode | c | events/s | events/message | p50 ms | p99 ms | µs/pair | ÷ echo (c = 1) | Synapse µs/pair | ÷ Synapse | errors |',
    '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results.rows) {
    const ours = coalescedUsPerPair(r);
    const s = synapseUsPerPair(r.row, synapse);
    const echo =
      r.mode === 'alone' && r.concurrency === 1
        ? results.rows.find((e) => e.row === r.row && e.mode === 'echo' && e.concurrency === 1)
        : undefined;
    const overEcho = echo === undefined ? '–' : (ours / coalescedUsPerPair(echo)).toFixed(2);
    const overSynapse = r.mode === 'echo' || s.us === undefined ? '–' : (ours / s.us).toFixed(2);
    lines.push(
      `| \`${r.row}\` | ${r.recipients} | ${r.mode} | ${r.concurrency} | ${Math.round(r.throughput).toLocaleString('en-US')} | ${r.eventsPerMessage.toFixed(1)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${us(ours)} | ${overEcho} | ${s.us === undefined ? '–' : `${us(s.us)} (${s.source})`} | ${overSynapse} | ${r.errors} |`,
    );
  }
  return lines.join('\n');
}

const us = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value >= 1 ? value.toFixed(2) : value.toFixed(3);
