/**
 * `evaluate/memory` (`npm run bench -- --only evaluate`, bench/README.md):
 * the memory of 100,000 cached users, and what holds it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { BIG } from './support/evaluate-context.js';
import {
  evaluateEvent,
  evaluateRoom,
  recipientsOf,
  scrapeEvaluateCounters,
  type EvaluateCounters,
} from './support/evaluate-load.js';
import { memoryGrowth, type MemoryResult, type MemorySample } from './support/evaluate-report.js';
import {
  connectInspector,
  heapGrowth,
  MEMORY_EXPRESSION,
  summarizeHeapSnapshot,
  type Inspector,
  type MemoryFigures,
} from './support/inspector.js';
import { priming } from './support/priming.js';
import type { Child } from './support/processes.js';
import { rssBytes } from './support/proc-stats.js';

const MEMORY_USERS = 100_000;

const log = (line: string) => {
  console.error(line);
};

async function memoryFigures(inspector: Inspector, pid: number, port: number): Promise<MemorySample> {
  await inspector.collectGarbage();
  await sleep(2000);
  await inspector.collectGarbage();
  await sleep(500);
  const figures = await inspector.evaluate<Omit<MemoryFigures, 'rssBytes'>>(MEMORY_EXPRESSION);
  const counters: EvaluateCounters = await scrapeEvaluateCounters(port);
  return { ...figures, rssBytes: rssBytes(pid), cacheEntries: counters.entries, cacheBytes: counters.bytes };
}

/** Fills the cache with `users` users on the default rules, 10,000 per request. */
async function cacheUsers(client: PushRulesClient, prefix: string, users: number): Promise<void> {
  for (let offset = 0; offset < users; offset += BIG) {
    await priming(async () =>
      client.evaluate(
        evaluateEvent(offset),
        evaluateRoom(BIG),
        recipientsOf(prefix, Math.min(BIG, users - offset), offset),
      ),
    );
  }
}

export async function memoryScenario(
  client: PushRulesClient,
  w: { child: Child; port: number },
  inspectPort: number,
): Promise<MemoryResult> {
  const inspector = await connectInspector(inspectPort);
  try {
    log('evaluate/memory: warming the worker up with 3 requests of the same 10,000 users');
    for (let i = 0; i < 3; i += 1) await cacheUsers(client, 'evalmemwarmup', BIG);
    const before = await memoryFigures(inspector, w.child.pid, w.port);
    log(
      `evaluate/memory: caching ${MEMORY_USERS.toLocaleString('en-US')} more users, ${BIG.toLocaleString('en-US')} per request`,
    );
    await cacheUsers(client, 'evalmem', MEMORY_USERS);
    const after = await memoryFigures(inspector, w.child.pid, w.port);
    const result: MemoryResult = {
      users: MEMORY_USERS,
      before,
      after,
      method:
        "A fresh worker (started with `--inspect` so that the benchmark can force a full garbage collection over the DevTools protocol; default configuration otherwise), its database empty, so that the recipients have no stored rules. Before: after 3 requests for the same 10,000 users (code paths, buffers and the JIT warm), a forced full GC twice, 2.5 s of rest. After: 10 requests of 10,000 users never seen before, then the same GC and rest. RSS is `VmRSS` of `/proc/<pid>/status`; the heap figures are the worker's `process.memoryUsage()` and V8's `malloced_memory`; the cache figures are its `/metrics` gauges (`push_worker_evaluate_cache_entries`, `..._bytes`, the estimate the cache is bounded by).",
    };
    const g = memoryGrowth(result);
    log(
      `evaluate/memory: RSS ${(g.rss / 1048576).toFixed(1)} MB more (${Math.round(g.perUserRss)} B/user), heap used ${(g.heapUsed / 1048576).toFixed(1)} MB more`,
    );
    return result;
  } finally {
    inspector.close();
  }
}

/** What holds the memory: heap snapshots before and after caching the same number of users, on another fresh worker. */
export async function heapProfile(
  client: PushRulesClient,
  inspectPort: number,
): Promise<NonNullable<MemoryResult['profile']>> {
  const inspector = await connectInspector(inspectPort);
  try {
    log('evaluate/memory: heap snapshots before and after caching the users, on a fresh worker');
    for (let i = 0; i < 3; i += 1) await cacheUsers(client, 'evalmemwarmup', BIG);
    await inspector.collectGarbage();
    const usedBefore = (await inspector.evaluate<{ heapUsed: number }>(MEMORY_EXPRESSION)).heapUsed;
    const before = summarizeHeapSnapshot(
      JSON.parse(await inspector.heapSnapshot()) as Parameters<typeof summarizeHeapSnapshot>[0],
    );
    await cacheUsers(client, 'evalmem', MEMORY_USERS);
    await inspector.collectGarbage();
    const usedAfter = (await inspector.evaluate<{ heapUsed: number }>(MEMORY_EXPRESSION)).heapUsed;
    const after = summarizeHeapSnapshot(
      JSON.parse(await inspector.heapSnapshot()) as Parameters<typeof summarizeHeapSnapshot>[0],
    );
    return { users: MEMORY_USERS, heapUsedGrowth: usedAfter - usedBefore, rows: heapGrowth(before, after) };
  } finally {
    inspector.close();
  }
}
