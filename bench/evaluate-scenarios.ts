/**
 * The `evaluate` part of `npm run bench` (issue 14): the kernel next to
 * Synapse in the same run, then one worker end to end over RabbitMQ (cache
 * warm and cold), the request queue's latency while large evaluates arrive,
 * and the memory of 100,000 cached users. See bench/README.md.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import type { MongoClient } from 'mongodb';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import type { EvaluationRecipient } from '../src/evaluation/evaluation-input.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { runEvaluateKernel } from './evaluate-kernel.js';
import { groupRecipientsByServer } from '../src/client/group-recipients.js';
import { decodeRulesetContent } from '../src/push-rules/decode-ruleset.js';
import { loadWorkload } from '../test/support/evaluate-bench-fixtures.js';
import { runClosedLoop } from './support/closed-loop.js';
import {
  counterDelta,
  evaluateEvent,
  evaluateRoom,
  recipientsOf,
  scrapeEvaluateCounters,
  type EvaluateCounters,
  type OpenLoopResult,
} from './support/evaluate-load.js';
import {
  COLD_P99_TARGET_MS,
  memoryGrowth,
  MEMORY_GROWTH_TARGET_BYTES,
  WARM_P99_TARGET_MS,
  type EvaluateResults,
  type IsolationResult,
  type LoopSummary,
  type MemoryResult,
  type MentionsRow,
  type MemorySample,
} from './support/evaluate-report.js';
import { latencyRow, type LatencyRow } from './support/latency-row.js';
import {
  connectInspector,
  heapGrowth,
  MEMORY_EXPRESSION,
  summarizeHeapSnapshot,
  type Inspector,
  type MemoryFigures,
} from './support/inspector.js';
import { freePort, startChild, startEchoConsumer, startWorkerWithHealth, type Child } from './support/processes.js';
import { cpuSeconds, runQueueWaitSeconds, rssBytes, startCpuWatch } from './support/proc-stats.js';
import { runSynapseAnchor } from './support/synapse-anchor.js';
import { runCoalescedRows } from './evaluate-coalesced.js';
import { echoCall, seedRulesetDocuments, UserPool, workerCall } from './support/workloads.js';
import type { WorkerPartContext } from './support/part-context.js';

export interface EvaluateContext extends WorkerPartContext {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Minimum repetitions per row, ours and Synapse's. */
  readonly reps: number;
  readonly synapseRows?: readonly string[];
  readonly coldSamples: number;
  /** Take heap snapshots even when the memory target is met. */
  readonly heapProfile: boolean;
  /** Whether a part (`evaluate/kernel`, `evaluate/latency`, `evaluate/isolation`, `evaluate/cold`, `evaluate/mentions`, `evaluate/coalesced`, `evaluate/memory`) runs. */
  readonly selected: (part: string) => boolean;
}

/** A worker's `evaluate.maxStalenessMs` by default: entries read longer ago are read again. */
const MAX_STALENESS_MS = 1000;
const MIN_WARM_SAMPLES = 200;
const CHUNK = 1000;
const LOAD_CONCURRENCY = 4;
const ISOLATION_CONCURRENCY = 16;
const ISOLATION_RATE = 10;
const ISOLATION_USERS = 1000;
const BIG = 10_000;
const MEMORY_USERS = 100_000;
const TIMEOUT_MS = 60_000;
/** The sender's deadline per evaluate: past it, a request counts as an error. */
const SENDER_TIMEOUT_MS = 15_000;

const log = (line: string) => {
  console.error(line);
};
const queueOf = (ctx: EvaluateContext) => `bench.push.rpc.${ctx.id}.e`;
const evaluateQueueOf = (ctx: EvaluateContext) => `${queueOf(ctx)}.evaluate`;

export async function runEvaluateScenarios(ctx: EvaluateContext): Promise<EvaluateResults> {
  const loadAverageAtStart = os.loadavg();
  log(`evaluate: load average ${loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')} at the start`);
  const notes: string[] = [];
  const latency: LatencyRow[] = [];
  const isolations: IsolationResult[] = [];
  const results: { -readonly [K in keyof EvaluateResults]: EvaluateResults[K] } = {
    cpus: os.cpus().length,
    loadAverageAtStart,
    latency,
    isolation: isolations,
    notes,
  };

  if (ctx.selected('evaluate/kernel')) {
    results.kernelLoadAverage = os.loadavg()[0] ?? Number.NaN;
    log('evaluate/kernel: our evaluator in process, every row');
    results.kernel = runEvaluateKernel({ minSamples: ctx.reps });
    for (const r of results.kernel)
      log(`  ${r.row.padEnd(14)} ${r.usPerPairMedian.toFixed(3)} µs/pair (${r.samplesMs.length} samples)`);
    log(
      `evaluate/kernel: Synapse's evaluator (synapse.sh --no-expected --reps ${ctx.reps}, a copy in a temporary directory)`,
    );
    results.synapse = await runSynapseAnchor({
      reps: ctx.reps,
      ...(ctx.synapseRows === undefined ? {} : { rows: ctx.synapseRows }),
      onLine: (line) => {
        log(`  synapse: ${line}`);
      },
    });
    if (!results.synapse.measured) log(`  Synapse not measured: ${results.synapse.reason}`);
  }

  const queue = queueOf(ctx);
  const evaluateQueue = evaluateQueueOf(ctx);
  const database = (part: string) => `bench_push_${ctx.id}_evaluate_${part}`;
  const databases: string[] = [];
  const workers: Child[] = [];
  const client = new PushRulesClient({ url: ctx.amqpUrl, queue, evaluateQueue, timeoutMs: TIMEOUT_MS });
  const startWorker = async (part: string, nodeArgs: readonly string[] = ctx.workerArgs) => {
    databases.push(database(part));
    const started = await startWorkerWithHealth(ctx.childEnv(queue, database(part)), nodeArgs);
    workers.push(started.child);
    if (started.healthPort === undefined) throw new Error('the worker did not log its metrics port');
    return { child: started.child, port: started.healthPort, db: ctx.mongo.db(database(part)) };
  };
  const stop = async (child: Child) => {
    await child.stop();
    workers.splice(workers.indexOf(child), 1);
  };

  try {
    if (ctx.selected('evaluate/latency')) {
      latency.push(...(await echoRows(ctx)));
      const w = await startWorker('warm');
      try {
        for (const n of [1000, BIG]) latency.push(...(await warmRows(client, w, n, ctx)));
        if (ctx.selected('evaluate/isolation')) {
          isolations.push(await isolation(client, w, ctx, ISOLATION_CONCURRENCY));
          isolations.push(await isolation(client, w, ctx, ISOLATION_USERS));
        }
      } finally {
        await stop(w.child);
      }
      notes.push(
        `**Cache warm**: the same recipients (no stored rules) in every request, one request at a time, after one that filled the cache and ${ctx.warmupMs / 1000} s of unmeasured requests. The worker's \`/metrics\` counters are read after each request; the \`warm\` row keeps the requests served entirely from the cache (at least ${MIN_WARM_SAMPLES}, and ${ctx.measureMs / 1000} s or more). Its "left out" column counts the others: with the default \`evaluate.maxStalenessMs\` (1 s), entries are read again once they are a second old, so about one request a second re-reads some or all recipients. The \`steady\` row is every request, those included (their re-reads hit an empty collection here, so they are cheap on the stand-in).`,
      );
    } else if (ctx.selected('evaluate/isolation')) {
      const w = await startWorker('isolation');
      try {
        isolations.push(await isolation(client, w, ctx, ISOLATION_CONCURRENCY));
        isolations.push(await isolation(client, w, ctx, ISOLATION_USERS));
      } finally {
        await stop(w.child);
      }
    }
    if (ctx.selected('evaluate/cold')) {
      latency.push(...(await coldRows(client, await startWorker('cold'), ctx, stop)));
      notes.push(
        `**Cache cold**: every recipient read from the store. \`stored\`: ${BIG.toLocaleString('en-US')} users each with a stored ruleset (the server defaults, as a worker stores them), their cached entries made stale by waiting more than \`evaluate.maxStalenessMs\` between requests (a stale entry is read again exactly like a missing one). \`no document\`: ${BIG.toLocaleString('en-US')} user IDs never seen before, without stored rules, fresh for every request: the worker still asks the store for them. The database holds the ${BIG.toLocaleString('en-US')} stored users' documents. The worker's counters are read around each request: one that was not ${BIG.toLocaleString('en-US')} misses and no hit would be left out. The first request of each row is not timed (code paths warm). With so few requests, p99 is the slowest of them. \`store …\` rows: the worker's bulk read of the same chunks (${CHUNK} IDs per query, ${LOAD_CONCURRENCY} at once, as EvaluateService does) from the benchmark process, with no broker and no evaluation.`,
      );
    }
    if (ctx.selected('evaluate/mentions')) {
      const w = await startWorker('mentions');
      try {
        results.mentions = await mentionsRows(ctx, client, w);
      } finally {
        await stop(w.child);
      }
    }
    if (ctx.selected('evaluate/coalesced')) {
      const w = await startWorker('coalesced');
      // The floor of the c = 1 rows: an echo consumer on a queue like the evaluate queue.
      const echoQueue = `bench.echo.${ctx.id}.rows`;
      const echo = await startEchoConsumer({
        ...ctx.childEnv(echoQueue, 'unused'),
        RPC_QUEUE_TYPE: 'classic',
        RPC_PREFETCH: '8',
      });
      try {
        results.coalesced = await runCoalescedRows({
          amqpUrl: ctx.amqpUrl,
          evaluateQueue,
          echoQueue,
          db: w.db,
          warmupMs: ctx.warmupMs,
          measureMs: ctx.measureMs,
          log,
        });
      } finally {
        await echo.stop();
        await ctx.deleteQueues(echoQueue).catch(() => undefined);
        await stop(w.child);
      }
    }
    if (ctx.selected('evaluate/memory')) {
      const inspectPort = await freePort();
      const w = await startWorker('memory', [`--inspect=127.0.0.1:${inspectPort}`]);
      let memory: MemoryResult;
      try {
        memory = await memoryScenario(client, w, inspectPort);
      } finally {
        await stop(w.child);
      }
      if (ctx.heapProfile || memoryGrowth(memory).rss > MEMORY_GROWTH_TARGET_BYTES) {
        const profilePort = await freePort();
        const p = await startWorker('memory_profile', [`--inspect=127.0.0.1:${profilePort}`]);
        try {
          memory = { ...memory, profile: await heapProfile(client, profilePort) };
        } finally {
          await stop(p.child);
        }
      }
      results.memory = memory;
    }
  } finally {
    await Promise.all(workers.map(async (w) => w.stop()));
    await client.close();
    await ctx.deleteQueues(queue).catch(() => undefined);
    for (const name of databases)
      await ctx.mongo
        .db(name)
        .dropDatabase()
        .catch(() => undefined);
  }
  return results;
}

const MENTIONS_CONCURRENCIES = [1, 8] as const;

/**
 * The evaluate-bench `mentions` row end to end (issue 23): its 60 events,
 * each to its 100 recipients (30 with the row's stored rules, seeded as a
 * worker stores them), one request per event, cycled in a closed loop at
 * c = 1 and 8 through `PushRulesClient.evaluate`; and, before them, the
 * classic echo consumer (the evaluate queue's type and prefetch) given the
 * very bodies the client sends, which is the broker's and the client's
 * share of the same round trips.
 */
async function mentionsRows(
  ctx: EvaluateContext,
  client: PushRulesClient,
  w: { db: ReturnType<MongoClient['db']> },
): Promise<MentionsRow[]> {
  const row = loadWorkload().rows.find((r) => r.name === 'mentions');
  if (row === undefined) throw new Error('the evaluate-bench workload has no mentions row');
  await seedRulesetDocuments(w.db, Object.keys(row.rules), (userId) => {
    const ruleset = decodeRulesetContent(row.rules[userId]);
    if (ruleset === undefined) throw new Error(`the mentions rules of ${userId} do not decode`);
    return ruleset;
  });
  const pairs = row.recipients.length;
  const rows: MentionsRow[] = [];
  const measure = async (id: string, concurrency: number, call: (i: number) => Promise<unknown>) => {
    const loop = await runClosedLoop({
      concurrency,
      warmupMs: ctx.warmupMs,
      measureMs: ctx.measureMs,
      // Each caller its own stride through the events.
      call: async (lane, i) => call(lane + i * concurrency),
    });
    const result: MentionsRow = {
      id,
      concurrency,
      pairs,
      requests: loop.ops,
      throughput: loop.throughput,
      p50Ms: loop.p50Ms,
      p99Ms: loop.p99Ms,
      errors: loop.errors,
    };
    log(
      `${`${id}/c${concurrency}`.padEnd(36)} ${Math.round(loop.throughput).toString().padStart(6)}/s  p50 ${loop.p50Ms.toFixed(2)} ms  p99 ${loop.p99Ms.toFixed(2)} ms  ${(1e6 / (loop.throughput * pairs)).toFixed(2)} µs/pair${loop.errors > 0 ? `  errors ${loop.errors} (${loop.firstError ?? ''})` : ''}`,
    );
    rows.push(result);
  };
  const eventAt = (i: number) => row.events[i % row.events.length] ?? row.events[0];
  const echoQueue = `bench.echo.${ctx.id}.mentions`;
  const echo = await startEchoConsumer({
    ...ctx.childEnv(echoQueue, 'unused'),
    RPC_QUEUE_TYPE: 'classic',
    RPC_PREFETCH: '8',
  });
  const rpc = new RpcClient({ url: ctx.amqpUrl, queue: echoQueue, timeoutMs: TIMEOUT_MS });
  try {
    for (const c of MENTIONS_CONCURRENCIES)
      await measure('broker/echo-classic/mentions', c, async (i) => {
        const { event, room } = eventAt(i) ?? { event: evaluateEvent(i), room: evaluateRoom(pairs) };
        // The body PushRulesClient.evaluate sends.
        return rpc.request({ op: 'evaluate', event, room, recipients: row.recipients, compact: true });
      });
  } finally {
    await rpc.close();
    await echo.stop();
    await ctx.deleteQueues(echoQueue).catch(() => undefined);
  }
  // The worker's first evaluate starts its evaluation thread: not part of any row.
  const first = eventAt(0);
  if (first !== undefined) await priming(async () => client.evaluate(first.event, first.room, row.recipients));
  for (const c of MENTIONS_CONCURRENCIES)
    await measure('evaluate/mentions', c, async (i) => {
      const { event, room } = eventAt(i) ?? { event: evaluateEvent(i), room: evaluateRoom(pairs) };
      return client.evaluate(event, room, row.recipients);
    });
  return rows;
}

/**
 * The broker's share of a round trip at c = 1: the echo consumer on a
 * queue like the evaluate queue (classic, prefetch 8), given a small body
 * and then the very request bodies of the evaluate rows (it answers `{}`).
 */
async function echoRows(ctx: EvaluateContext): Promise<LatencyRow[]> {
  const echoQueue = `bench.echo.${ctx.id}.evaluate`;
  const echo = await startEchoConsumer({
    ...ctx.childEnv(echoQueue, 'unused'),
    RPC_QUEUE_TYPE: 'classic',
    RPC_PREFETCH: '8',
  });
  const rpc = new RpcClient({ url: ctx.amqpUrl, queue: echoQueue, timeoutMs: TIMEOUT_MS });
  const rows: LatencyRow[] = [];
  try {
    const run = async (id: string, what: string, recipients: number, call: () => Promise<unknown>) => {
      const loop = await runClosedLoop({ concurrency: 1, warmupMs: ctx.warmupMs, measureMs: ctx.measureMs, call });
      rows.push({
        id,
        what,
        recipients,
        samples: loop.ops,
        p50Ms: loop.p50Ms,
        p99Ms: loop.p99Ms,
        maxMs: Number.NaN,
        errors: loop.errors,
        excluded: 0,
      });
      log(`${id.padEnd(36)} p50 ${loop.p50Ms.toFixed(2)} ms  p99 ${loop.p99Ms.toFixed(2)} ms  (${loop.ops} requests)`);
    };
    const small = echoCall(rpc);
    await run('broker/echo/small', 'echo consumer, a small request', 0, async () => small(0, 0));
    for (const n of [1000, BIG]) {
      const body = {
        op: 'evaluate',
        event: evaluateEvent(0),
        room: evaluateRoom(n),
        recipients: recipientsOf(`evalwarm${n}`, n),
      };
      await run(`broker/echo/evaluate-${n}`, 'echo consumer, the same request body (reply `{}`)', n, async () =>
        rpc.request(body),
      );
      // What PushRulesClient.evaluate sends for a list this long: the recipients grouped by server.
      const { recipients, ...rest } = body;
      const grouped = {
        ...rest,
        recipients_by_server: groupRecipientsByServer(recipients)?.groups,
        compact: true,
        runs: true,
      };
      await run(
        `broker/echo/evaluate-${n}-grouped`,
        'echo consumer, the body the client sends (recipients grouped by server; reply `{}`)',
        n,
        async () => rpc.request(grouped),
      );
    }
  } finally {
    await rpc.close();
    await echo.stop();
    await ctx.deleteQueues(echoQueue).catch(() => undefined);
  }
  return rows;
}

/**
 * Requests one after the other for the same recipients (c = 1), the
 * worker's counters read after each. `warm`: the requests served entirely
 * from the cache, judged on the target; `steady`: every request, including
 * those that read some recipients again because their entries had passed
 * `evaluate.maxStalenessMs` (about one a second with the defaults).
 */
async function warmRows(
  client: PushRulesClient,
  w: { child: Child; port: number },
  n: number,
  ctx: EvaluateContext,
): Promise<LatencyRow[]> {
  const { port } = w;
  const recipients = recipientsOf(`evalwarm${n}`, n);
  const room = evaluateRoom(n);
  const warm: number[] = [];
  const all: number[] = [];
  const counted = { errors: 0, refreshed: 0, i: 0 };
  // Fills the cache.
  await priming(async () => client.evaluate(evaluateEvent(counted.i++), room, recipients));
  let counters = await scrapeEvaluateCounters(port);
  const measureFrom = performance.now() + ctx.warmupMs;
  let cpuFrom: number | undefined;
  let waitFrom: number | undefined;
  for (;;) {
    const now = performance.now();
    const measuring = now >= measureFrom;
    if (measuring) {
      cpuFrom ??= cpuSeconds(w.child.pid);
      waitFrom ??= runQueueWaitSeconds(w.child.pid);
    }
    if (
      measuring &&
      ((now - measureFrom >= ctx.measureMs && warm.length >= MIN_WARM_SAMPLES) ||
        now - measureFrom >= 8 * ctx.measureMs)
    )
      break;
    const begin = performance.now();
    let failed = false;
    try {
      await client.evaluate(evaluateEvent(counted.i++), room, recipients);
    } catch {
      failed = true;
    }
    const elapsed = performance.now() - begin;
    const after = await scrapeEvaluateCounters(port);
    const delta = counterDelta(counters, after);
    counters = after;
    if (!measuring) continue;
    if (failed) {
      counted.errors += 1;
      continue;
    }
    all.push(elapsed);
    if (delta.misses === 0 && delta.hits === n) warm.push(elapsed);
    else counted.refreshed += 1;
  }
  const requests = all.length + counted.errors;
  const workerCpuMsPerRequest = ((cpuSeconds(w.child.pid) - (cpuFrom ?? Number.NaN)) * 1000) / requests;
  const workerWaitMsPerRequest = ((runQueueWaitSeconds(w.child.pid) - (waitFrom ?? Number.NaN)) * 1000) / requests;
  const target = WARM_P99_TARGET_MS[n];
  const rows = [
    latencyRow(
      {
        id: `evaluate/warm/${n}`,
        what: 'cache warm',
        recipients: n,
        errors: counted.errors,
        excluded: counted.refreshed,
        ...(target === undefined ? {} : { targetP99Ms: target }),
      },
      warm,
    ),
    latencyRow(
      {
        id: `evaluate/steady/${n}`,
        what: 'steady state: warm, and the staleness re-reads',
        recipients: n,
        errors: counted.errors,
        workerCpuMsPerRequest,
        workerWaitMsPerRequest,
      },
      all,
    ),
  ];
  rows.forEach(logRow);
  return rows;
}

/** Each request after a pause, its recipients all read from the store (checked on the worker's counters). */
async function coldLatencies(
  client: PushRulesClient,
  port: number,
  samples: number,
  recipientsFor: (i: number) => readonly EvaluationRecipient[],
  pauseMs: number,
): Promise<{ latencies: number[]; errors: number; excluded: number }> {
  const latencies: number[] = [];
  const counted = { errors: 0, excluded: 0 };
  for (let i = 0; i <= samples; i += 1) {
    await sleep(pauseMs);
    const recipients = recipientsFor(i);
    const before = await scrapeEvaluateCounters(port);
    const begin = performance.now();
    let failed = false;
    try {
      await client.evaluate(evaluateEvent(i), evaluateRoom(recipients.length), recipients);
    } catch {
      failed = true;
    }
    const elapsed = performance.now() - begin;
    const delta = counterDelta(before, await scrapeEvaluateCounters(port));
    // The first request warms the code paths.
    if (i === 0) continue;
    if (failed) counted.errors += 1;
    else if (delta.hits !== 0 || delta.misses !== recipients.length) counted.excluded += 1;
    else latencies.push(elapsed);
  }
  return { latencies, ...counted };
}

async function coldRows(
  client: PushRulesClient,
  w: { child: Child; port: number; db: ReturnType<MongoClient['db']> },
  ctx: EvaluateContext,
  stop: (child: Child) => Promise<void>,
): Promise<LatencyRow[]> {
  const rows: LatencyRow[] = [];
  try {
    const stored = recipientsOf('evalstored', BIG);
    log(`evaluate/cold: seeding ${BIG.toLocaleString('en-US')} stored rulesets`);
    await seedRulesetDocuments(
      w.db,
      stored.map((r) => r.user_id),
    );
    const fresh = (i: number) => recipientsOf(`evalnew${i}`, BIG);
    const pause = MAX_STALENESS_MS + 200;
    const storedRun = await coldLatencies(client, w.port, ctx.coldSamples, () => stored, pause);
    rows.push(
      latencyRow(
        {
          id: `evaluate/cold/stored/${BIG}`,
          what: 'cache cold, stored rules',
          recipients: BIG,
          ...without(storedRun),
          targetP99Ms: COLD_P99_TARGET_MS,
        },
        storedRun.latencies,
      ),
    );
    logRow(rows[rows.length - 1]);
    const freshRun = await coldLatencies(client, w.port, ctx.coldSamples, fresh, 200);
    rows.push(
      latencyRow(
        {
          id: `evaluate/cold/no-doc/${BIG}`,
          what: 'cache cold, no stored rules',
          recipients: BIG,
          ...without(freshRun),
          targetP99Ms: COLD_P99_TARGET_MS,
        },
        freshRun.latencies,
      ),
    );
    logRow(rows[rows.length - 1]);
  } finally {
    await stop(w.child);
  }
  // The store's share, without the worker: the same bulk reads from here.
  const store = new MongoPushStore(w.db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' });
  const accountData = w.db.collection<{ _id: string }>('account_data');
  const storeSamples = Math.max(3, Math.ceil(ctx.coldSamples / 2));
  const storeRow = async (
    id: string,
    what: string,
    idsFor: (i: number) => readonly string[],
    read: (chunk: string[]) => Promise<unknown>,
  ) => {
    const latencies: number[] = [];
    for (let i = 0; i <= storeSamples; i += 1) {
      const ids = idsFor(i);
      const chunks: string[][] = [];
      for (let start = 0; start < ids.length; start += CHUNK) chunks.push(ids.slice(start, start + CHUNK));
      const begin = performance.now();
      await inBatches(chunks, LOAD_CONCURRENCY, read);
      if (i > 0) latencies.push(performance.now() - begin);
    }
    const row = latencyRow({ id, what, recipients: BIG }, latencies);
    logRow(row);
    rows.push(row);
  };
  const storedIds = recipientsOf('evalstored', BIG).map((r) => r.user_id);
  await storeRow(
    `store/loadMany/stored/${BIG}`,
    'store: loadManyPushRules, stored rules',
    () => storedIds,
    async (chunk) => store.loadManyPushRules(chunk),
  );
  await storeRow(
    `store/loadMany/no-doc/${BIG}`,
    'store: loadManyPushRules, no stored rules',
    (i) => recipientsOf(`evalstorenew${i}`, BIG).map((r) => r.user_id),
    async (chunk) => store.loadManyPushRules(chunk),
  );
  await storeRow(
    `store/_id-in/stored/${BIG}`,
    'store, diagnostic: the same read without `push_rules: {$exists: true}`',
    () => storedIds,
    async (chunk) => accountData.find({ _id: { $in: chunk } }, { projection: { version: 1, push_rules: 1 } }).toArray(),
  );
  return rows;
}

const without = (run: { errors: number; excluded: number }) => ({ errors: run.errors, excluded: run.excluded });

/**
 * `get_pushrule_enabled` at c = 16 alone, then while a process of its own
 * sends 10,000-recipient evaluates on a timer, then alone again, on `users`
 * users with stored rules. 1,000 users is the judged case; 16 users (one
 * per caller) leaves the collection nearly empty, which takes the
 * stand-in's collection scans out of the evaluates' re-reads (a diagnostic
 * of what the worker alone does).
 */
async function isolation(
  client: PushRulesClient,
  w: { child: Child; port: number; db: ReturnType<MongoClient['db']> },
  ctx: EvaluateContext,
  users: number,
): Promise<IsolationResult> {
  const pool = new UserPool(`evaliso${users}`, users);
  await seedRulesetDocuments(w.db, pool.ids);
  const tag = `users${users}`;
  const watched: Record<string, number | undefined> = { worker: w.child.pid, ...ctx.others };
  const loop = async (id: string, extra: Record<string, number | undefined> = {}): Promise<LoopSummary> => {
    const watch = startCpuWatch({ ...watched, ...extra });
    const r = await runClosedLoop({
      concurrency: ISOLATION_CONCURRENCY,
      warmupMs: ctx.warmupMs,
      measureMs: ctx.measureMs,
      call: workerCall(client, pool, 'get_pushrule_enabled', ISOLATION_CONCURRENCY),
    });
    const summary = {
      ops: r.ops,
      throughput: r.throughput,
      p50Ms: r.p50Ms,
      p99Ms: r.p99Ms,
      errors: r.errors,
      cpu: watch.stop(),
    };
    log(
      `${id.padEnd(36)} ${Math.round(r.throughput).toString().padStart(7)}/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms${r.errors > 0 ? ` errors ${r.errors} (${r.firstError ?? ''})` : ''}`,
    );
    return summary;
  };
  const before = await loop(`evaluate/isolation/${tag}/alone`);
  const resultDir = mkdtempSync(join(os.tmpdir(), 'bench-sender-'));
  const resultFile = join(resultDir, 'result.json');
  try {
    const sender = await startChild(
      'evaluate sender',
      ['--import', 'tsx', 'bench/evaluate-sender.ts'],
      {
        ...process.env,
        AMQP_URL: ctx.amqpUrl,
        EVALUATE_QUEUE: evaluateQueueOf(ctx),
        SENDER_RATE: String(ISOLATION_RATE),
        SENDER_RECIPIENTS: String(BIG),
        SENDER_PREFIX: `evalisorecipient${tag}`,
        SENDER_DURATION_MS: String(ctx.warmupMs + ctx.measureMs + 500),
        SENDER_MEASURE_FROM_MS: String(ctx.warmupMs),
        SENDER_MEASURE_TO_MS: String(ctx.warmupMs + ctx.measureMs),
        SENDER_TIMEOUT_MS: String(SENDER_TIMEOUT_MS),
        SENDER_RESULT_FILE: resultFile,
      },
      (line) => line === 'ready',
    );
    const exited = sender.process.exitCode === null ? once(sender.process, 'exit') : Promise.resolve();
    const countersBefore = await scrapeEvaluateCounters(w.port);
    const loaded = await loop(`evaluate/isolation/${tag}/with-evaluates`, { sender: sender.pid });
    await exited;
    const evaluateCounters = counterDelta(countersBefore, await scrapeEvaluateCounters(w.port));
    const senderResult = JSON.parse(readFileSync(resultFile, 'utf8')) as OpenLoopResult;
    log(
      `  evaluates: ${senderResult.sent} sent, ${senderResult.answered} answered, ${senderResult.errors} errors, p50 ${senderResult.p50Ms.toFixed(1)} ms, p99 ${senderResult.p99Ms.toFixed(1)} ms; worker: ${evaluateCounters.recipients} recipients, ${evaluateCounters.misses} read from the store in ${evaluateCounters.storeQueries} queries`,
    );
    // Requests the sender gave up on may still be queued or under way: let the worker finish them first.
    await drain(ctx.amqpUrl, evaluateQueueOf(ctx), w.port);
    const after = await loop(`evaluate/isolation/${tag}/alone-after`);
    return {
      users,
      judged: users === ISOLATION_USERS,
      concurrency: ISOLATION_CONCURRENCY,
      before,
      loaded,
      after,
      sender: senderResult,
      senderRecipients: BIG,
      evaluateCounters,
    };
  } finally {
    rmSync(resultDir, { recursive: true, force: true });
  }
}

/**
 * Purges the evaluate queue and waits until the worker has answered what it
 * had taken (nothing in flight at two readings 500 ms apart), so that the
 * next phase does not share the store with their reads.
 */
async function drain(url: string, queue: string, port: number): Promise<void> {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  await channel.purgeQueue(queue);
  await connection.close();
  for (let idle = 0, waited = 0; idle < 2 && waited < 60_000; waited += 500) {
    await sleep(500);
    idle = (await scrapeEvaluateCounters(port)).inFlight === 0 ? idle + 1 : 0;
  }
}

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

async function memoryScenario(
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
async function heapProfile(
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

/**
 * An unmeasured request that readies the worker (its thread, its cache),
 * sent again after `Unavailable`: on a shared machine the store may miss a
 * deadline once, and that is no reason to stop the whole run.
 */
async function priming(call: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await call();
      return;
    } catch (error) {
      if (attempt >= 5 || (error as { kind?: unknown }).kind !== 'Unavailable') throw error;
      log(`  priming request answered Unavailable (attempt ${attempt}); sending it again`);
    }
  }
}

function logRow(row: LatencyRow | undefined): void {
  if (row === undefined) return;
  const left = row.excluded > 0 ? `, ${row.excluded} left out` : '';
  const errors = row.errors > 0 ? `, ${row.errors} errors` : '';
  log(
    `${row.id.padEnd(36)} p50 ${row.p50Ms.toFixed(2)} ms  p99 ${row.p99Ms.toFixed(2)} ms  max ${row.maxMs.toFixed(2)} ms  (${row.samples} requests${left}${errors})`,
  );
}

/** Runs `work` on every item, at most `concurrency` at once (as EvaluateService loads chunks). */
async function inBatches<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next] as T;
        next += 1;
        await work(item);
      }
    }),
  );
}
