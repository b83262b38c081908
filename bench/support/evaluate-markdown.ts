/** The evaluate part's section of the bench report (issues 14 and 23), from the results of one run. */
import { coalescedMarkdown } from './evaluate-coalesced-report.js';
import {
  COLD_P99_TARGET_MS,
  COLD_STORE_RATE_TARGET,
  ISOLATION_RATIO_TARGET,
  KERNEL_RATIO_TARGET,
  WARM_P99_TARGET_MS,
  coldVsStore,
  isolationRatio,
  kernelVsSynapse,
  memoryGrowth,
  usPerPair,
  type EvaluateResults,
} from './evaluate-report.js';
import { mb, ms, us } from './evaluate-figures.js';

/** Issue 23's table: the figures it is judged on, from the rows of this run. */
export function issue23Markdown(e: EvaluateResults): string {
  const lines = [
    '### Issue 23: the request path (same run)',
    '',
    '| measured | figure | target | met |',
    '|---|---|---|---|',
  ];
  const row = (measured: string, figure: string, target: string, met: boolean | undefined) => {
    lines.push(`| ${measured} | ${figure} | ${target} | ${met === undefined ? '–' : met ? 'yes' : '**no**'} |`);
  };
  for (const n of [1000, 10_000]) {
    const warm = e.latency.find((r) => r.id === `evaluate/warm/${n}`);
    const target = WARM_P99_TARGET_MS[n] ?? Number.NaN;
    if (warm !== undefined)
      row(
        `warm, ${n.toLocaleString('en-US')} recipients, p99`,
        `${ms(warm.p99Ms)} ms (p50 ${ms(warm.p50Ms)})`,
        `≤ ${target} ms`,
        warm.samples > 0 && warm.p99Ms <= target,
      );
  }
  const cold = e.latency.find((r) => r.id.startsWith('evaluate/cold/stored/'));
  if (cold !== undefined) {
    const rate = coldVsStore(e.latency);
    row(
      'cold, stored rules, 10,000 recipients, p99',
      `${ms(cold.p99Ms)} ms (p50 ${ms(cold.p50Ms)})`,
      `≤ ${COLD_P99_TARGET_MS} ms`,
      cold.samples > 0 && cold.p99Ms <= COLD_P99_TARGET_MS,
    );
    if (rate !== undefined)
      row(
        "cold ÷ the store's bulk read of the same 10,000 documents (rate)",
        `${rate.ratio.toFixed(2)} (store p50 ${ms(rate.storeMs)} ms, evaluate p50 ${ms(rate.coldMs)} ms)`,
        `≥ ${COLD_STORE_RATE_TARGET}`,
        rate.ratio >= COLD_STORE_RATE_TARGET,
      );
  }
  for (const isolation of e.isolation.filter((i) => i.judged)) {
    const ratio = isolationRatio(isolation);
    row(
      `get_pushrule_enabled p99 at c=${isolation.concurrency} with ${isolation.sender.ratePerSecond} evaluates/s of ${isolation.senderRecipients.toLocaleString('en-US')}`,
      `${Number.isFinite(ratio) ? ratio.toFixed(2) : '∞'} × idle (${ms(isolation.loaded.p99Ms)} vs ${ms(isolation.before.p99Ms)} ms)`,
      `≤ ${ISOLATION_RATIO_TARGET} × idle`,
      ratio <= ISOLATION_RATIO_TARGET,
    );
  }
  for (const m of e.mentions ?? []) {
    row(
      `${m.id}, c=${m.concurrency}`,
      `${us(usPerPair(m))} µs/pair (p50 ${ms(m.p50Ms)} ms, p99 ${ms(m.p99Ms)} ms, ${Math.round(m.throughput)}/s)`,
      m.id.startsWith('broker/')
        ? 'the broker alone'
        : `Synapse in process: ${us(MENTIONS_SYNAPSE_US_PER_PAIR)} µs/pair`,
      undefined,
    );
  }
  return lines.join('\n');
}

/** Synapse's evaluator on the `mentions` row, in process (evaluate-bench README, with evaluator construction). */
const MENTIONS_SYNAPSE_US_PER_PAIR = 5.7;

export function evaluateMarkdown(e: EvaluateResults): string {
  const lines: string[] = ['## evaluate (issues 14 and 23)', '', issue23Markdown(e), ''];
  lines.push(
    `Load average at the start of the evaluate part: ${e.loadAverageAtStart.map((l) => l.toFixed(2)).join(', ')} (1, 5, 15 min), on ${e.cpus} cores.`,
  );
  for (const note of e.notes) lines.push('', note);
  if (e.kernel !== undefined && e.synapse !== undefined) {
    const synapse = e.synapse;
    lines.push('', '### Kernel vs Synapse, same run (µs per (event, recipient) pair, median)', '');
    if (synapse.measured) {
      lines.push(
        `Synapse ${synapse.synapseVersion} (Python ${synapse.python}), \`synapse.sh --no-expected --reps ${synapse.repsMin}\` on a copy of the scripts, ${synapse.seconds.toFixed(0)} s, load average ${synapse.loadAverageAtStart?.toFixed(2) ?? '?'} at its start; ours in process, load average ${e.kernelLoadAverage?.toFixed(2) ?? '?'} at its start.`,
        '',
      );
    } else {
      lines.push(`Synapse not measured: ${synapse.reason}`, '');
    }
    lines.push(
      '| row | pairs | ours µs/pair | samples | Synapse µs/pair (with construction) | samples | ours ÷ Synapse | target | met |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const r of kernelVsSynapse(e.kernel, synapse)) {
      const met = r.ratio === undefined ? 'not measured' : r.ratio <= KERNEL_RATIO_TARGET ? 'yes' : '**no**';
      lines.push(
        `| \`${r.row}\` | ${r.pairs.toLocaleString('en-US')} | ${us(r.oursUsPerPair)} | ${r.oursSamples} | ${r.synapseUsPerPair === undefined ? '–' : us(r.synapseUsPerPair)} | ${r.synapseSamples ?? '–'} | ${r.ratio === undefined ? '–' : r.ratio.toFixed(4)} | ≤ ${KERNEL_RATIO_TARGET} | ${met} |`,
      );
    }
  }
  if (e.mentions !== undefined && e.mentions.length > 0) {
    lines.push(
      '',
      "### The evaluate-bench `mentions` row end to end (60 events × 100 recipients, 30 with stored rules, cache warm), next to the classic echo's round trip of the same request bodies",
      '',
      '| scenario | c | requests | req/s | p50 ms | p99 ms | µs/pair | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const m of e.mentions)
      lines.push(
        `| ${m.id} | ${m.concurrency} | ${m.requests} | ${Math.round(m.throughput).toLocaleString('en-US')} | ${ms(m.p50Ms)} | ${ms(m.p99Ms)} | ${us(usPerPair(m))} | ${m.errors} |`,
      );
  }
  if (e.coalesced !== undefined) lines.push('', coalescedMarkdown(e.coalesced, e.synapse));
  if (e.latency.length > 0) {
    lines.push(
      '',
      '### End to end, one worker, c = 1 (round trip as the caller sees it)',
      '',
      '| scenario | what | recipients | requests | p50 ms | p99 ms | max ms | errors | left out | worker CPU ms/request (one `/metrics` read included) | worker waiting for a CPU, ms/request |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const r of e.latency) {
      lines.push(
        `| ${r.id} | ${r.what} | ${r.recipients.toLocaleString('en-US')} | ${r.samples} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${ms(r.maxMs)} | ${r.errors} | ${r.excluded} | ${r.workerCpuMsPerRequest === undefined ? '' : ms(r.workerCpuMsPerRequest)} | ${r.workerWaitMsPerRequest === undefined ? '' : ms(r.workerWaitMsPerRequest)} |`,
      );
    }
  }
  for (const isolation of e.isolation) {
    const { before, loaded, after, sender, concurrency, senderRecipients, evaluateCounters: counters } = isolation;
    lines.push(
      '',
      `### Isolation${isolation.judged ? '' : ` (diagnostic: ${isolation.users} stored users only, so the store scans almost nothing)`}: get_pushrule_enabled at c = ${concurrency} on ${isolation.users.toLocaleString('en-US')} users, with and without ${sender.ratePerSecond} evaluates/s of ${senderRecipients.toLocaleString('en-US')} recipients`,
      '',
      '| phase | req/s | p50 ms | p99 ms | errors | CPU % (per process) |',
      '|---|---:|---:|---:|---:|---|',
    );
    for (const [name, r] of [
      ['alone (before)', before],
      ['with the evaluates', loaded],
      ['alone (after)', after],
    ] as const) {
      lines.push(
        `| ${name} | ${Math.round(r.throughput).toLocaleString('en-US')} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.errors} | ${cpuText(r.cpu)} |`,
      );
    }
    const ratio = isolationRatio(isolation);
    lines.push(
      '',
      `p99 with ÷ p99 alone (before): ${Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : 'no request answered under load'}. The evaluates meanwhile (open loop, sent from a process of its own): ${sender.sent} sent in the measured window, ${sender.answered} answered, ${sender.errors} errors${sender.firstError === undefined ? '' : ` (${sender.firstError})`}; round trip p50 ${ms(sender.p50Ms)} ms, p99 ${ms(sender.p99Ms)} ms, max ${ms(sender.maxMs)} ms; at most ${sender.maxInFlight} outstanding; the sender's schedule slipped by ${ms(sender.maxSendLagMs)} ms at worst. The worker's counters over the loaded phase: ${counters.recipients.toLocaleString('en-US')} recipients evaluated, ${counters.hits.toLocaleString('en-US')} from the cache, ${counters.misses.toLocaleString('en-US')} read from the store in ${counters.storeQueries.toLocaleString('en-US')} queries (${counters.staleRefreshes.toLocaleString('en-US')} because their entry had passed \`maxStalenessMs\`).`,
    );
  }
  if (e.memory !== undefined) {
    const m = e.memory;
    const g = memoryGrowth(m);
    lines.push(
      '',
      `### Memory: ${m.users.toLocaleString('en-US')} more users cached (default rules)`,
      '',
      m.method,
      '',
      '| | RSS | heap used | heap total | external | V8 malloced | cache entries | cache estimate |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      `| before | ${mb(m.before.rssBytes)} | ${mb(m.before.heapUsed)} | ${mb(m.before.heapTotal)} | ${mb(m.before.external)} | ${mb(m.before.mallocedMemory)} | ${m.before.cacheEntries.toLocaleString('en-US')} | ${mb(m.before.cacheBytes)} |`,
      `| after | ${mb(m.after.rssBytes)} | ${mb(m.after.heapUsed)} | ${mb(m.after.heapTotal)} | ${mb(m.after.external)} | ${mb(m.after.mallocedMemory)} | ${m.after.cacheEntries.toLocaleString('en-US')} | ${mb(m.after.cacheBytes)} |`,
      `| growth | **${mb(g.rss)}** | ${mb(g.heapUsed)} | ${mb(g.heapTotal)} | ${mb(g.external)} | ${mb(g.malloced)} | ${(m.after.cacheEntries - m.before.cacheEntries).toLocaleString('en-US')} | ${mb(m.after.cacheBytes - m.before.cacheBytes)} |`,
      `| per user | ${Math.round(g.perUserRss)} B | ${Math.round(g.perUserHeap)} B | | | | | ${Math.round(g.perUserEstimate)} B |`,
    );
    if (m.profile !== undefined) {
      lines.push(
        '',
        `Heap snapshots before and after caching ${m.profile.users.toLocaleString('en-US')} users on another fresh worker (self sizes; heap used grew ${mb(m.profile.heapUsedGrowth)}):`,
        '',
        '| kind of heap object | count | bytes | bytes per user |',
        '|---|---:|---:|---:|',
      );
      for (const row of m.profile.rows) {
        lines.push(
          `| \`${row.kind}\` | ${row.count.toLocaleString('en-US')} | ${mb(row.bytes)} | ${(row.bytes / m.profile.users).toFixed(1)} |`,
        );
      }
    }
  }
  return lines.join('\n');
}

const cpuText = (cpu: Readonly<Record<string, number>>) =>
  Object.entries(cpu)
    .map(([name, value]) => `${name} ${Number.isFinite(value) ? Math.round(value) : '–'}`)
    .join(', ');
