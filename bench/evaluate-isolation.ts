/**
 * `evaluate/isolation` (`npm run bench -- --only evaluate`, bench/README.md):
 * the request queue's latency while large evaluates arrive.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import type { MongoClient } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { runClosedLoop } from './support/closed-loop.js';
import { BIG, evaluateQueueOf, type EvaluateContext } from './support/evaluate-context.js';
import { counterDelta, scrapeEvaluateCounters, type OpenLoopResult } from './support/evaluate-load.js';
import type { IsolationResult, LoopSummary } from './support/evaluate-report.js';
import { startChild, type Child } from './support/processes.js';
import { startCpuWatch } from './support/proc-stats.js';
import { seedRulesetDocuments, UserPool, workerCall } from './support/workloads.js';

export const ISOLATION_CONCURRENCY = 16;
const ISOLATION_RATE = 10;
export const ISOLATION_USERS = 1000;
/** The sender's deadline per evaluate: past it, a request counts as an error. */
const SENDER_TIMEOUT_MS = 15_000;

const log = (line: string) => {
  console.error(line);
};

/**
 * `get_pushrule_enabled` at c = 16 alone, then while a process of its own
 * sends 10,000-recipient evaluates on a timer, then alone again, on `users`
 * users with stored rules. 1,000 users is the judged case; 16 users (one
 * per caller) leaves the collection nearly empty, which takes the
 * stand-in's collection scans out of the evaluates' re-reads (a diagnostic
 * of what the worker alone does).
 */
export async function isolation(
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
