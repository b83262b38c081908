import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { RpcTransportError } from '../../src/client/rpc-errors.js';
import { deleteTopology, uniqueNames, type Names } from '../integration/support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from '../integration/support/worker-processes.js';
import { startPrivateMongo, type PrivateMongo } from './support/private-mongo.js';

/**
 * The store stalls (the MongoDB process paused with SIGSTOP, as in the
 * issue) while writes come in, several for the same user: each is answered
 * Unavailable before its caller's deadline, not held for the stall; the
 * writes queued behind a stalled one of their user never reach the store;
 * after SIGCONT the worker serves again, and a retry with the same
 * messageId applies each write once.
 *
 * The worker runs on a MongoDB stand-in of this test's own, on its own
 * port: the shared one on 27017 is never paused.
 */
const USERS = Array.from({ length: 4 }, (_, i) => `@stall${i}:example.org`);
/** Per user: the first write has a longer deadline than the three queued behind it. */
const HEAD_TIMEOUT_MS = 3_000;
const QUEUED_TIMEOUT_MS = 1_500;
const QUEUED_PER_USER = 3;
const PAUSE_MS = 5_000;

let mongo: PrivateMongo;
let names: Names;
let worker: WorkerProcess;
let client: RpcClient;
let inspector: MongoClient;
let db: Db;

beforeAll(async () => {
  mongo = await startPrivateMongo();
  names = uniqueNames();
  worker = await startWorkerProcess(workerEnvironment(names, { MONGODB_URL: mongo.url }));
  client = new RpcClient({ url: names.amqp.url, queue: names.queue, timeoutMs: 10_000 });
  inspector = new MongoClient(mongo.url, { serverSelectionTimeoutMS: 10_000 });
  db = inspector.db(names.database);
  for (const user of USERS) expect((await client.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
});
afterAll(async () => {
  mongo.resume();
  await client.close();
  await stopWorkerProcess(worker, 'SIGKILL');
  await deleteTopology(names).catch(() => undefined);
  await inspector.close();
  await mongo.stop();
});

interface Sent {
  readonly user: string;
  readonly ruleId: string;
  readonly messageId: string;
  readonly timeoutMs: number;
  readonly head: boolean;
}

function writeOf(sent: Sent) {
  return {
    op: 'set_pushrule',
    user_id: sent.user,
    scope: 'global',
    kind: 'room',
    rule_id: sent.ruleId,
    rule: { actions: ['notify'] },
  };
}

async function send(sent: Sent): Promise<{ outcome: string; ms: number }> {
  const at = Date.now();
  try {
    const reply = await client.request(writeOf(sent), { messageId: sent.messageId, timeoutMs: sent.timeoutMs });
    return { outcome: reply.ok ? 'ok' : reply.error.kind, ms: Date.now() - at };
  } catch (error) {
    if (!(error instanceof RpcTransportError)) throw error;
    return { outcome: error.reason, ms: Date.now() - at };
  }
}

async function metric(line: RegExp): Promise<number> {
  const text = await (await fetch(`${worker.healthUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => line.test(l))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

async function storedRuleIds(user: string): Promise<{ version: number; ruleIds: string[] }> {
  const doc = await db
    .collection<{ _id: string; version?: number; push_rules?: { content_json?: string } }>('account_data')
    .findOne({ _id: user });
  const content = JSON.parse(doc?.push_rules?.content_json ?? '{"global":{"room":[]}}') as {
    global: { room: { rule_id: string }[] };
  };
  return { version: doc?.version ?? 0, ruleIds: content.global.room.map((r) => r.rule_id) };
}

describe('the MongoDB stand-in paused under writes', () => {
  it('answers every write Unavailable within its deadline, starts nothing for the queued ones, and serves again after', async () => {
    const writes: Sent[] = USERS.flatMap((user, u) =>
      Array.from({ length: 1 + QUEUED_PER_USER }, (_, k) => ({
        user,
        ruleId: `!stall${u}-${k}:example.org`,
        messageId: `stall-${names.queue}-${u}-${k}`,
        timeoutMs: k === 0 ? HEAD_TIMEOUT_MS : QUEUED_TIMEOUT_MS,
        head: k === 0,
      })),
    );

    mongo.pause();
    const pausedAt = Date.now();
    // In order: each user's head is taken first and its read stalls; the others wait behind it.
    const results = await Promise.all(writes.map(async (w) => send(w)));
    const answeredBy = Date.now() - pausedAt;

    const outcomes = writes.map((w, i) => ({ ...w, ...(results[i] ?? { outcome: 'missing', ms: NaN }) }));
    // Unavailable, and neither a timeout (no reply by the caller's deadline) nor served.
    expect(outcomes.map((o) => o.outcome)).toEqual(writes.map(() => 'Unavailable'));
    for (const o of outcomes) expect(o.ms).toBeLessThan(o.timeoutMs);
    // Not answered at once either: they waited for the store until close to their deadline (generous bounds).
    for (const o of outcomes) expect(o.ms).toBeGreaterThan(o.timeoutMs / 2);
    expect(answeredBy).toBeLessThan(PAUSE_MS);

    await sleep(PAUSE_MS - (Date.now() - pausedAt));
    mongo.resume();
    const resumedAt = Date.now();

    // Serves again: a read per user answers ok (retried while the driver finds the server again).
    let recoveredMs = NaN;
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const replies = await Promise.all(
        USERS.map(async (user) =>
          client.request({ op: 'get_pushrules', user_id: user }, { timeoutMs: 5_000 }).catch(() => undefined),
        ),
      );
      if (replies.every((r) => r?.ok === true)) {
        recoveredMs = Date.now() - resumedAt;
        break;
      }
      await sleep(100);
    }
    expect(recoveredMs).toBeLessThan(10_000);

    // Nothing of the stalled writes was applied: the heads' reads never came back in time, and the
    // queued writes never started a store operation (their deadline had passed when their turn came).
    for (const user of USERS) expect(await storedRuleIds(user)).toEqual({ version: 1, ruleIds: [] });
    const notStarted = await metric(
      /^push_worker_store_operations_abandoned_total\{operation="loadPushRules",reason="not-started"\}/,
    );
    const givenUp = await metric(/^push_worker_store_operations_abandoned_total\{.*reason="deadline"\}/);
    const deadlinePassed = await metric(/^push_worker_deadline_passed_total\{op="set_pushrule",queue="request"\}/);
    expect(notStarted).toBeGreaterThanOrEqual(USERS.length * QUEUED_PER_USER);
    expect(deadlinePassed).toBeGreaterThanOrEqual(USERS.length * QUEUED_PER_USER);
    expect(worker.lines.filter((l) => l['msg'] === 'request failed unexpectedly')).toEqual([]);

    // A caller's retry with the same messageId: applied once.
    const retried = await Promise.all(
      writes.map(async (w) => client.request(writeOf(w), { messageId: w.messageId, timeoutMs: 10_000 })),
    );
    expect(retried.map((r) => r.ok)).toEqual(writes.map(() => true));
    for (const user of USERS) {
      const stored = await storedRuleIds(user);
      expect(stored.ruleIds.sort()).toEqual(
        writes
          .filter((w) => w.user === user)
          .map((w) => w.ruleId)
          .sort(),
      );
      expect(stored.version).toBe(1 + 1 + QUEUED_PER_USER);
    }

    // Why each was answered, as logged: the deadline, or a driver timeout that came first.
    const causes: Record<string, number> = {};
    for (const line of worker.lines.filter((l) => l['msg'] === 'request not served' && l['op'] === 'set_pushrule')) {
      const cause = String(line['cause']).replace(/\d+/g, 'N');
      causes[cause] = (causes[cause] ?? 0) + 1;
    }
    const range = (head: boolean) => {
      const ms = outcomes.filter((o) => o.head === head).map((o) => o.ms);
      return `${Math.min(...ms)}–${Math.max(...ms)} ms`;
    };
    console.info(
      `[fault: store stall] stand-in paused ${resumedAt - pausedAt} ms; ${writes.length} writes, every one Unavailable within its deadline: ` +
        `${USERS.length * QUEUED_PER_USER} queued behind their user's first (deadline ${QUEUED_TIMEOUT_MS} ms) in ${range(false)}, ` +
        `${USERS.length} firsts (deadline ${HEAD_TIMEOUT_MS} ms) in ${range(true)}; store operations not started ${notStarted}, given up at the deadline ${givenUp}; ` +
        `none applied; serving again ${recoveredMs} ms after SIGCONT; retried with the same messageIds: each applied once; causes ${JSON.stringify(causes)}`,
    );
  });
});
