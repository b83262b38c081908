/**
 * The evaluate-bench `mentions` row end to end (`evaluate/mentions` of
 * `npm run bench -- --only evaluate`, issue 23; bench/README.md).
 */
import type { MongoClient } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { decodeRulesetContent } from '../src/push-rules/decode-ruleset.js';
import { loadWorkload } from '../test/support/evaluate-bench-fixtures.js';
import { runClosedLoop } from './support/closed-loop.js';
import { TIMEOUT_MS, type EvaluateContext } from './support/evaluate-context.js';
import { evaluateEvent, evaluateRoom } from './support/evaluate-load.js';
import type { MentionsRow } from './support/evaluate-report.js';
import { priming } from './support/priming.js';
import { startEchoConsumer } from './support/processes.js';
import { seedRulesetDocuments } from './support/workloads.js';

const log = (line: string) => {
  console.error(line);
};

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
export async function mentionsRows(
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
