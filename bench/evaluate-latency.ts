/**
 * The latency rows of `evaluate/latency` (`npm run bench -- --only
 * evaluate`, bench/README.md): the broker's share of a round trip (the echo
 * consumer), then one worker with its cache warm.
 */
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { groupRecipientsByServer } from '../src/client/group-recipients.js';
import { runClosedLoop } from './support/closed-loop.js';
import { BIG, TIMEOUT_MS, type EvaluateContext } from './support/evaluate-context.js';
import {
  counterDelta,
  evaluateEvent,
  evaluateRoom,
  recipientsOf,
  scrapeEvaluateCounters,
} from './support/evaluate-load.js';
import { WARM_P99_TARGET_MS } from './support/evaluate-report.js';
import { latencyRow, logRow, type LatencyRow } from './support/latency-row.js';
import { priming } from './support/priming.js';
import { startEchoConsumer, type Child } from './support/processes.js';
import { cpuSeconds, runQueueWaitSeconds } from './support/proc-stats.js';
import { echoCall } from './support/workloads.js';

export const MIN_WARM_SAMPLES = 200;

const log = (line: string) => {
  console.error(line);
};

/**
 * The broker's share of a round trip at c = 1: the echo consumer on a
 * queue like the evaluate queue (classic, prefetch 8), given a small body
 * and then the very request bodies of the evaluate rows (it answers `{}`).
 */
export async function echoRows(ctx: EvaluateContext): Promise<LatencyRow[]> {
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
export async function warmRows(
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
