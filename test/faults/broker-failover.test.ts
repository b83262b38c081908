import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import type { WorkerProcess } from '../integration/support/worker-processes.js';
import { waitForLeader, type ClusterNode } from '../support/rabbit-cluster.js';
import {
  clusterUrls,
  db,
  down,
  kill,
  names,
  nodeOfBroker,
  nodes,
  SERVE_AGAIN_WITHIN_MS,
  useFailoverWorld,
  workers,
} from './support/failover-world.js';
import { ruleWrites, tally, type LoadOutcome } from './support/load.js';

// Writes across the loss of a node. The gateway across it, and a worker that starts
// with a node down, are in broker-failover-processes.test.ts.

useFailoverWorld();
let client: RpcClient;
/** Users of one run of writes: their own, so that no user reaches the limit of rules. */
const usersOf = (tag: string) => Array.from({ length: 6 }, (_, i) => `@failover-${tag}${i}:example.org`);

/** Lines that say a worker lost its broker connection, and why. */
const LOSS_LINES = new Set(['lost the broker connection; reconnecting', 'the broker connection closed']);

/** `broker: reason` of every loss a worker logged since `since`, and how long each reconnect took. */
function lossesSince(worker: WorkerProcess, since: number): string[] {
  return worker.lines
    .filter((l) => Date.parse(String(l['time'])) >= since)
    .flatMap((l) => {
      if (LOSS_LINES.has(String(l['msg']))) return [`${String(l['broker'])}: ${String(l['reason'])}`];
      if (l['msg'] === 'reconnected to RabbitMQ')
        return [`reconnected to ${String(l['broker'])} in ${String(l['totalMs'])} ms`];
      return [];
    });
}

/** The node a worker process is connected to now: its last "connected"/"reconnected" line. */
/**
 * The node a worker's session is on now: `requests` (the session that
 * consumes the request queues) or `delivery` (its delivery thread's, which
 * may end on another node after a failover). Partitions and the router have
 * connections of their own, named apart.
 */
function workerNode(worker: WorkerProcess, session: 'requests' | 'delivery' = 'requests'): ClusterNode | undefined {
  const line = worker.lines
    .filter(
      (l) =>
        (l['msg'] === 'connected to RabbitMQ' || l['msg'] === 'reconnected to RabbitMQ') &&
        l['connection'] === 'matrix-push-worker' &&
        (l['thread'] === 'delivery') === (session === 'delivery'),
    )
    .at(-1);
  return nodeOfBroker(line?.['broker']);
}

beforeAll(() => {
  client = new RpcClient({
    url: clusterUrls(),
    queue: names.queue,
    timeoutMs: 3_000,
    publisherUserId: 'guest',
  });
});
afterAll(async () => {
  await client.close();
});

/** Version and rule IDs of a user's stored push rules. */
async function stored(user: string): Promise<{ version: number; ruleIds: string[] }> {
  const doc = await db
    .collection<{ _id: string; version?: number; push_rules?: { content_json?: string } }>('account_data')
    .findOne({ _id: user });
  const content = JSON.parse(doc?.push_rules?.content_json ?? '{"global":{}}') as {
    global: Record<string, { rule_id: string; default: boolean }[]>;
  };
  return {
    version: doc?.version ?? 0,
    ruleIds: Object.values(content.global)
      .flat()
      .filter((r) => !r.default)
      .map((r) => r.rule_id),
  };
}

interface FailoverRun {
  readonly outcomes: LoadOutcome[];
  readonly killedAt: number;
  /** The longest time without any reply ok that spans the kill. */
  readonly gapMs: number;
}

/** Writes under load for `beforeMs`, kills `victim()`, goes on for `afterMs`. */
async function writesAcross(
  tag: string,
  victim: () => Promise<ClusterNode>,
  beforeMs: number,
  afterMs: number,
): Promise<FailoverRun & { node: ClusterNode }> {
  const USERS = usersOf(tag);
  for (const user of USERS) expect((await client.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
  const state = { running: true };
  const load = ruleWrites(client, USERS, tag, () => state.running);
  await sleep(beforeMs);
  const node = await victim();
  const killedAt = Date.now();
  await kill(node);
  await sleep(afterMs);
  state.running = false;
  const outcomes = await load;
  // Every reply ok, in time order: the gap is the longest silence that spans the kill.
  const oks = outcomes
    .filter((o) => o.outcome === 'ok')
    .map((o) => o.doneAt)
    .sort((x, y) => x - y);
  let gapMs = 0;
  for (let i = 1; i < oks.length; i += 1) {
    const [before, after] = [oks[i - 1] ?? 0, oks[i] ?? 0];
    if (after >= killedAt && before <= killedAt + afterMs) gapMs = Math.max(gapMs, after - Math.max(before, killedAt));
  }
  return { outcomes, killedAt, gapMs, node };
}

/** Every write acknowledged, and applied once: one rule and one version per write, for each user. */
async function expectEachWriteOnce(outcomes: readonly LoadOutcome[], tag: string): Promise<void> {
  const USERS = usersOf(tag);
  expect(tally(outcomes.map((o) => o.outcome))).toEqual({ ok: outcomes.length });
  for (const user of USERS) {
    const acknowledged = outcomes
      .filter((o) => o.request.user === user)
      .map((o) => (o.request.body as { rule_id: string }).rule_id);
    const rules = (await stored(user)).ruleIds.filter((id) => id.startsWith(`!${tag}`));
    expect(rules.sort()).toEqual(acknowledged.sort());
  }
}

describe('a three-node broker cluster losing a node', () => {
  it('the node a worker is connected to: it consumes again through a survivor; every write applied once', async () => {
    const worker = workers[0];
    if (worker === undefined) throw new Error('no worker');
    const USERS = usersOf('w');
    const run = await writesAcross(
      'w',
      async () => {
        const node = workerNode(worker);
        if (node === undefined) throw new Error('worker 0 logged no broker');
        return Promise.resolve(node);
      },
      3_000,
      12_000,
    );
    await expectEachWriteOnce(run.outcomes, 'w');
    // One version per write that changed something: nothing applied twice.
    const versionsAfter = await Promise.all(USERS.map(async (u) => (await stored(u)).version));
    const written = USERS.map((u) => run.outcomes.filter((o) => o.request.user === u).length);
    // Version 1 from get_pushrules, then one per write.
    expect(versionsAfter).toEqual(written.map((n) => 1 + n));

    const since = (l: Record<string, unknown>) => Date.parse(String(l['time'])) >= run.killedAt;
    const back = worker.lines.find(
      (l) =>
        l['msg'] === 'reconnected to RabbitMQ' &&
        l['connection'] === 'matrix-push-worker' &&
        l['thread'] !== 'delivery' &&
        since(l),
    );
    expect(back).toBeDefined();
    const reconnectMs = Date.parse(String(back?.['time'])) - run.killedAt;
    expect(reconnectMs).toBeLessThan(SERVE_AGAIN_WITHIN_MS);
    expect(nodeOfBroker(back?.['broker'])).not.toBe(run.node);
    // What a user of the pool sees: the worker is on a live node now and
    // served every write. Which survivor it ends on is the broker's business
    // (a survivor may itself drop the connection while the cluster settles:
    // every loss and its reason is printed below).
    const now = workerNode(worker);
    expect(now).toBeDefined();
    expect(now).not.toBe(run.node);
    // The delivery thread's session fails over by the same rule, on its own clock.
    const deliveryDeadline = run.killedAt + SERVE_AGAIN_WITHIN_MS;
    while (workerNode(worker, 'delivery') === run.node && Date.now() < deliveryDeadline) await sleep(100);
    const deliveryNode = workerNode(worker, 'delivery');
    expect(deliveryNode).toBeDefined();
    expect(deliveryNode).not.toBe(run.node);
    const metrics = await (await fetch(`${worker.healthUrl}/metrics`)).text();
    // Each session by itself: the request path's and the delivery thread's may
    // end on different survivors, and neither may hide the other's state.
    expect(metrics).toContain(`push_worker_amqp_connected{broker="127.0.0.1:${run.node.port}",session="requests"} 0`);
    expect(metrics).toContain(`push_worker_amqp_connected{broker="127.0.0.1:${now?.port ?? 0}",session="requests"} 1`);
    expect(metrics).toContain(
      `push_worker_amqp_connected{broker="127.0.0.1:${deliveryNode?.port ?? 0}",session="delivery"} 1`,
    );
    const losses = lossesSince(worker, run.killedAt);
    const retried = run.outcomes.filter((o) => o.failedAttempts.length > 0);
    console.info(
      `[fault: cluster node of a worker killed] ${run.node.name} killed; worker 0 consumed again through ${String(back?.['broker'])} after ${reconnectMs} ms ` +
        `(attempt ${String(back?.['attemptMs'])} ms), and is on ${now?.name ?? '?'} now; connections lost since the kill: ${JSON.stringify(losses)}; ` +
        `longest time without a reply ok ${run.gapMs} ms; ${run.outcomes.length} writes all ok, ${retried.length} retried ` +
        `(${JSON.stringify(tally(retried.flatMap((o) => o.failedAttempts)))}); each applied once`,
    );
  });

  it('the node the client is connected to: its pending calls fail at once, new ones go through a survivor; every write applied once', async () => {
    const run = await writesAcross(
      'c',
      async () => {
        const node = nodeOfBroker(client.broker);
        if (node === undefined) throw new Error('the client is not connected');
        return Promise.resolve(node);
      },
      3_000,
      8_000,
    );
    await expectEachWriteOnce(run.outcomes, 'c');
    expect(nodeOfBroker(client.broker)).not.toBe(run.node);
    const lost = run.outcomes.flatMap((o) => o.failedAttempts).filter((f) => f === 'connection-lost').length;
    // Calls pending on the lost connection fail with connection-lost, not a timeout.
    expect(lost).toBeGreaterThan(0);
    expect(run.gapMs).toBeLessThan(SERVE_AGAIN_WITHIN_MS);
    const retried = run.outcomes.filter((o) => o.failedAttempts.length > 0);
    console.info(
      `[fault: cluster node of the client killed] ${run.node.name} killed; the client is on ${client.broker ?? 'nothing'} now; ` +
        `longest time without a reply ok ${run.gapMs} ms; ${run.outcomes.length} writes all ok, ${retried.length} retried ` +
        `(${JSON.stringify(tally(retried.flatMap((o) => o.failedAttempts)))}); each applied once`,
    );
  });

  it('the node leading the request queue: a survivor leads, the workers serve on; every write applied once', async () => {
    const survivors = () => nodes.filter((n) => !down.has(n));
    await waitForLeader(names.queue, survivors());
    const run = await writesAcross('l', async () => waitForLeader(names.queue, survivors()), 3_000, 12_000);
    await expectEachWriteOnce(run.outcomes, 'l');
    const leaderNow = await waitForLeader(
      names.queue,
      nodes.filter((n) => n !== run.node),
    );
    expect(leaderNow).not.toBe(run.node);
    expect(run.gapMs).toBeLessThan(SERVE_AGAIN_WITHIN_MS);
    const retried = run.outcomes.filter((o) => o.failedAttempts.length > 0);
    // Workers whose node was the leader reconnect while the queue elects a
    // new one: what each lost, and why, is printed for the record.
    const workerLosses = workers
      .map((w, i) => `worker ${i}: ${JSON.stringify(lossesSince(w, run.killedAt))}`)
      .join('; ');
    console.info(
      `[fault: cluster leader of the request queue killed] ${run.node.name} killed; ${leaderNow.name} leads now; ` +
        `longest time without a reply ok ${run.gapMs} ms; ${run.outcomes.length} writes all ok, ${retried.length} retried ` +
        `(${JSON.stringify(tally(retried.flatMap((o) => o.failedAttempts)))}); each applied once; ${workerLosses}`,
    );
  });
});
