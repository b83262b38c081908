/**
 * `evaluate/coalesced` (issue 35, parts 1–3): every row of the
 * evaluate-bench workload end to end through one worker. At c = 1, each
 * call alone next to an echo consumer given the very same bodies (the
 * transport's floor, measured right before it); then
 * `PushRulesClient.evaluate` called by c = 8 and c = 64 callers at once
 * (the client coalescing their calls into batch messages), next to each
 * call sent alone at c = 8; µs per (event, recipient) pair against the echo
 * and Synapse's evaluator in process. Before the timed loops, every event
 * of every row goes through the coalescing client once and each answer is
 * checked against expected.json.
 */
import type { Db } from 'mongodb';
import { PushRulesClient, type EvaluateCoalescing, type RpcTransport } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { decodeRulesetContent } from '../src/push-rules/decode-ruleset.js';
import { loadExpected, loadWorkload, type WorkloadRow } from '../test/support/evaluate-bench-fixtures.js';

type WorkloadEvent = WorkloadRow['events'][number];
import { runClosedLoop } from './support/closed-loop.js';
import { checkAnswers, type CoalescedResults, type CoalescedRow } from './support/evaluate-coalesced-report.js';
import { seedRulesetDocuments } from './support/workloads.js';

export interface CoalescedContext {
  readonly amqpUrl: string;
  readonly evaluateQueue: string;
  /** The database of the worker serving `evaluateQueue`. */
  readonly db: Db;
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly log: (line: string) => void;
  /** An echo consumer's queue (classic, the evaluate queue's prefetch): the c = 1 rows' floor; absent, not measured. */
  readonly echoQueue?: string;
}

/** The loops of each row: how the client sends, and how many callers. */
const LOOPS: readonly { readonly mode: CoalescedRow['mode']; readonly concurrency: number }[] = [
  // The echo right before the worker on the same bodies, so both meet about the same machine.
  { mode: 'echo', concurrency: 1 },
  { mode: 'alone', concurrency: 1 },
  { mode: 'alone', concurrency: 8 },
  { mode: 'coalesced', concurrency: 8 },
  { mode: 'coalesced', concurrency: 64 },
];
const TIMEOUT_MS = 60_000;

/** A transport that counts the messages it is handed and the events in them. */
function countingTransport(rpc: RpcClient) {
  const counts = { messages: 0, events: 0 };
  const transport: RpcTransport = {
    request: async (body, options) => {
      counts.messages += 1;
      // The coalescer hands text (EncodedBody); a call sent alone, an object.
      const json = 'json' in body ? (JSON.parse((body as { json: string }).json) as { events?: unknown[] }) : {};
      counts.events += json.events?.length ?? 1;
      return rpc.request(body, options);
    },
    publish: async (body, options) => rpc.publish(body, options),
    close: async () => rpc.close(),
  };
  return { transport, counts };
}

export async function runCoalescedRows(ctx: CoalescedContext): Promise<CoalescedResults> {
  const workload = loadWorkload();
  const expected = loadExpected();
  for (const row of workload.rows)
    await seedRulesetDocuments(ctx.db, Object.keys(row.rules), (userId) => {
      const ruleset = decodeRulesetContent(row.rules[userId]);
      if (ruleset === undefined) throw new Error(`the rules of ${userId} (${row.name}) do not decode`);
      return ruleset;
    });
  const clientOf = (coalescing: EvaluateCoalescing | false) => {
    const rpc = new RpcClient({ url: ctx.amqpUrl, queue: 'unused', timeoutMs: TIMEOUT_MS });
    const { transport, counts } = countingTransport(rpc);
    const client = new PushRulesClient(
      { url: ctx.amqpUrl, evaluateQueue: ctx.evaluateQueue, timeoutMs: TIMEOUT_MS, evaluateCoalescing: coalescing },
      transport,
    );
    return { client, counts };
  };
  const coalesced = clientOf({});
  const alone = clientOf(false);
  const echo =
    ctx.echoQueue === undefined
      ? undefined
      : new RpcClient({ url: ctx.amqpUrl, queue: ctx.echoQueue, timeoutMs: TIMEOUT_MS });
  // The body \`PushRulesClient.evaluate\` sends for one event alone, given to the echo consumer as it is.
  const echoSender =
    echo === undefined
      ? undefined
      : {
          counts: { messages: 0, events: 0 },
          evaluate: async (event: unknown, room: unknown, recipients: unknown) =>
            echo.request({ op: 'evaluate', event, room, recipients, compact: true }),
        };
  const rows: CoalescedRow[] = [];
  let answers = { right: 0, checked: 0, wrong: [] as string[] };
  try {
    // Every event of every row, all of a row's at once (so coalesced), checked against expected.json.
    for (const row of workload.rows) {
      const replies = await Promise.all(
        row.events.map(async ({ event, room }) => coalesced.client.evaluate(event, room, row.recipients)),
      );
      const checked = checkAnswers(
        expected.filter((pair) => pair.row === row.name),
        replies,
      );
      answers = {
        right: answers.right + checked.right,
        checked: answers.checked + checked.checked,
        wrong: [...answers.wrong, ...checked.wrong],
      };
    }
    ctx.log(`evaluate/coalesced: answers ${answers.right} of ${answers.checked} right (expected.json)`);
    for (const row of workload.rows)
      for (const { mode, concurrency } of LOOPS) {
        const sender =
          mode === 'echo'
            ? echoSender
            : mode === 'alone'
              ? { counts: alone.counts, evaluate: alone.client.evaluate.bind(alone.client) }
              : { counts: coalesced.counts, evaluate: coalesced.client.evaluate.bind(coalesced.client) };
        if (sender !== undefined) rows.push(await loop(ctx, row, sender, mode, concurrency));
      }
  } finally {
    await coalesced.client.close();
    await alone.client.close();
    await echo?.close();
  }
  return { rows, answers };
}

/** What a loop calls: the client's \`evaluate\` (coalescing or not), or the echo given the same body. */
interface Sender {
  readonly counts: { readonly messages: number; readonly events: number };
  readonly evaluate: (
    event: WorkloadEvent['event'],
    room: WorkloadEvent['room'],
    recipients: WorkloadRow['recipients'],
  ) => Promise<unknown>;
}

async function loop(
  ctx: CoalescedContext,
  row: WorkloadRow,
  sender: Sender,
  mode: CoalescedRow['mode'],
  concurrency: number,
): Promise<CoalescedRow> {
  const { events } = row;
  const before = { ...sender.counts };
  const result = await runClosedLoop({
    concurrency,
    warmupMs: ctx.warmupMs,
    measureMs: ctx.measureMs,
    // Each caller its own stride through the row's events.
    call: async (lane, i) => {
      const { event, room } = events[(lane + i * concurrency) % events.length] ??
        events[0] ?? { event: undefined, room: undefined };
      if (event === undefined) throw new Error(`row ${row.name} has no events`);
      return sender.evaluate(event, room, row.recipients);
    },
  });
  const messages = sender.counts.messages - before.messages;
  const sentEvents = sender.counts.events - before.events;
  const measured: CoalescedRow = {
    row: row.name,
    mode,
    concurrency,
    recipients: row.recipients.length,
    requests: result.ops,
    throughput: result.throughput,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    errors: result.errors,
    eventsPerMessage: mode === 'echo' ? 1 : messages === 0 ? Number.NaN : sentEvents / messages,
  };
  ctx.log(
    `evaluate/coalesced ${row.name.padEnd(13)} ${mode.padEnd(9)} c=${String(concurrency).padEnd(3)} ${Math.round(result.throughput).toString().padStart(6)} events/s  ${(1e6 / (result.throughput * row.recipients.length)).toFixed(2)} µs/pair  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  ${measured.eventsPerMessage.toFixed(1)} events/message${result.errors > 0 ? `  errors ${result.errors} (${result.firstError ?? ''})` : ''}`,
  );
  return measured;
}
