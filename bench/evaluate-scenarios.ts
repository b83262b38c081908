/**
 * The `evaluate` part of `npm run bench` (issue 14): the kernel next to
 * Synapse in the same run, then one worker end to end over RabbitMQ (cache
 * warm and cold), the request queue's latency while large evaluates arrive,
 * and the memory of 100,000 cached users. See bench/README.md.
 */
import * as os from 'node:os';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { runEvaluateKernel } from './evaluate-kernel.js';
import { coldRows, CHUNK, LOAD_CONCURRENCY } from './evaluate-cold.js';
import { isolation, ISOLATION_CONCURRENCY, ISOLATION_USERS } from './evaluate-isolation.js';
import { echoRows, MIN_WARM_SAMPLES, warmRows } from './evaluate-latency.js';
import { heapProfile, memoryScenario } from './evaluate-memory.js';
import { mentionsRows } from './evaluate-mentions.js';
import { BIG, evaluateQueueOf, queueOf, TIMEOUT_MS, type EvaluateContext } from './support/evaluate-context.js';
import {
  memoryGrowth,
  MEMORY_GROWTH_TARGET_BYTES,
  type EvaluateResults,
  type IsolationResult,
  type MemoryResult,
} from './support/evaluate-report.js';
import type { LatencyRow } from './support/latency-row.js';
import { freePort, startEchoConsumer, startWorkerWithHealth, type Child } from './support/processes.js';
import { runSynapseAnchor } from './support/synapse-anchor.js';
import { runCoalescedRows } from './evaluate-coalesced.js';

const log = (line: string) => {
  console.error(line);
};

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
