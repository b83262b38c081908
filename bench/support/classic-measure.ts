/**
 * One scenario of `npm run bench`'s classic part (issues 5 and 6) measured:
 * its load on the workers serving now, their CPU and RSS and the broker's
 * and the store's, its row among the run's results.
 */
import { runClosedLoop, type LoopResult } from './closed-loop.js';
import { findPid, startWorker, type Child } from './processes.js';
import { peakRssBytes, rssBytes, startCpuWatch } from './proc-stats.js';
import type { Group, RssPeak, ScenarioResult } from './report.js';
import { MEASURE_MS, ONLY, PROFILE_ARGS, WARMUP_MS } from './run-flags.js';
import { childEnv, names } from './run-services.js';
import type { Call } from './workloads.js';

export const CONCURRENCIES = [1, 16, 64] as const;
export const USERS = 1000;

export const results: ScenarioResult[] = [];
/** The workers serving now. */
export const workers: Child[] = [];
/** The kernel's RSS high-water mark of the workers stopped so far, by what they ran. */
export const peaks: RssPeak[] = [];

export async function addWorker(database?: string): Promise<void> {
  workers.push(await startWorker(childEnv(names.queue, database), PROFILE_ARGS));
}

export async function stopWorkers(ran: string): Promise<void> {
  if (workers.length > 0) peaks.push({ ran, bytes: Math.max(...workers.map((w) => peakRssBytes(w.pid))) });
  await Promise.all(workers.map(async (w) => w.stop()));
  workers.length = 0;
}
export const others: Record<string, number | undefined> = {
  rabbitmq: findPid('beam.smp'),
  mongodb: findPid('H2MongoServer'),
};

export interface Scenario {
  readonly id: string;
  readonly group: Group;
  readonly op: string;
  readonly concurrency: number;
  /** A closed loop of these calls, or `run` for a load of another kind. */
  readonly call?: Call;
  readonly run?: () => Promise<LoopResult>;
  readonly userRules?: number;
  readonly users?: number;
}

/** Reads the client sent to the request queue instead of the read queue, per scenario (0 when routing worked). */
export const readFallbacks = { count: 0 };

export async function measure(scenario: Scenario): Promise<void> {
  if (ONLY !== undefined && scenario.group !== 'broker' && scenario.group !== 'store' && !ONLY.test(scenario.id))
    return;
  const watched: Record<string, number | undefined> = {
    ...Object.fromEntries(workers.map((w, i) => [`worker${workers.length > 1 ? String(i + 1) : ''}`, w.pid])),
    ...others,
  };
  const cpuWatch = startCpuWatch(watched);
  const rss = { max: undefined as number | undefined };
  const sampler = setInterval(() => {
    for (const w of workers) rss.max = Math.max(rss.max ?? 0, rssBytes(w.pid));
  }, 250);
  // A scenario that throws skips the clearInterval below: unref'd, it cannot keep the bench alive.
  sampler.unref();
  readFallbacks.count = 0;
  const { call, run } = scenario;
  const loop =
    run !== undefined
      ? await run()
      : await runClosedLoop({
          concurrency: scenario.concurrency,
          warmupMs: WARMUP_MS,
          measureMs: MEASURE_MS,
          call: call ?? (async () => Promise.resolve()),
        });
  clearInterval(sampler);
  const cpu = cpuWatch.stop();
  const result: ScenarioResult = {
    ...loop,
    id: scenario.id,
    group: scenario.group,
    op: scenario.op,
    workers: scenario.group === 'broker' || scenario.group === 'store' ? 0 : workers.length,
    userRules: scenario.userRules ?? 0,
    users: scenario.users ?? USERS,
    cpu,
    workerRssBytes: rss.max,
    ...(readFallbacks.count > 0 ? { readFallbacks: readFallbacks.count } : {}),
  };
  results.push(result);
  const errors = result.errors > 0 ? ` errors ${result.errors} (${result.firstError ?? ''})` : '';
  const fallbacks = readFallbacks.count > 0 ? `  ${readFallbacks.count} reads fell back to the request queue` : '';
  console.error(
    `${scenario.id.padEnd(44)} ${Math.round(result.throughput).toString().padStart(7)}/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms${errors}${fallbacks}`,
  );
}
