import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { connectAmqp } from '../../src/amqp/amqp-connect.js';
import { deleteTopology, uniqueNames, type Names } from '../integration/support/worker-harness.js';
import {
  startServiceProcess,
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from '../integration/support/worker-processes.js';
import {
  CLUSTER_HOOK_TIMEOUT_MS,
  clusterUp,
  killNode,
  restoreCluster,
  startNode,
  waitForLeader,
  type ClusterNode,
} from '../support/rabbit-cluster.js';
import { ruleWrites, tally, type LoadOutcome } from './support/load.js';

/**
 * The service on the local three-node cluster (`scripts/services.sh
 * cluster-up`), given every node in AMQP_URL. A node is killed (SIGKILL of
 * its Erlang VM) under a load of writes that carry `messageId`s and are
 * retried when they time out or lose their connection, as a front does:
 *
 * - the node a worker is connected to: the worker consumes again through
 *   a surviving node, within 10 s;
 * - the node that leads the request queue (a quorum queue): a survivor
 *   takes over;
 *
 * and in both, every write is acknowledged, and applied exactly once (the
 * stored version counts the writes). Then a worker is started while a node
 * of three is down, with the read and evaluate queues (classic) homed on
 * that node: it starts and serves, and consumes them once the node is back.
 */
const WORKERS = 3;
const SERVE_AGAIN_WITHIN_MS = 10_000;
let nodes: readonly ClusterNode[];
let names: Names;
let mongo: MongoClient;
let db: Db;
let client: RpcClient;
const workers: WorkerProcess[] = [];
/** Nodes this file killed and has not started again. */
const down = new Set<ClusterNode>();
/** Users of one run of writes: their own, so that no user reaches the limit of rules. */
const usersOf = (tag: string) => Array.from({ length: 6 }, (_, i) => `@failover-${tag}${i}:example.org`);

const clusterUrls = () => nodes.map((n) => n.url).join(',');
const nodeOfBroker = (broker: unknown) => nodes.find((n) => `127.0.0.1:${n.port}` === broker);

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

async function startWorker(extra: Record<string, string> = {}): Promise<WorkerProcess> {
  const worker = await startWorkerProcess(
    workerEnvironment(names, { AMQP_URL: clusterUrls(), LOG_LEVEL: 'info', ...extra }),
  );
  workers.push(worker);
  return worker;
}

async function kill(node: ClusterNode): Promise<void> {
  down.add(node);
  await killNode(node);
}

async function revive(node: ClusterNode): Promise<void> {
  await startNode(node);
  down.delete(node);
}

beforeAll(async () => {
  nodes = await clusterUp();
  const own = uniqueNames();
  names = { ...own, amqp: { ...own.amqp, url: nodes[0]?.url ?? '' } };
  mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  db = mongo.db(names.database);
  for (let i = 0; i < WORKERS; i += 1) await startWorker();
  client = new RpcClient({
    url: clusterUrls(),
    queue: names.queue,
    timeoutMs: 3_000,
    publisherUserId: 'guest',
  });
}, CLUSTER_HOOK_TIMEOUT_MS);

// Whatever a test did to the cluster is undone before the next one starts,
// passed or failed: a node left down would make the next kill take the
// quorum away, and one failure would fail every test after it.
afterEach(async () => {
  await restoreCluster(nodes, down, [names.queue]);
}, CLUSTER_HOOK_TIMEOUT_MS);

afterAll(async () => {
  await client.close();
  await Promise.all(workers.map(async (w) => stopWorkerProcess(w, 'SIGKILL')));
  await deleteTopology(names).catch(() => undefined);
  await db.dropDatabase().catch(() => undefined);
  await mongo.close();
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

  it('the node the gateway is on: it answers throughout, with 503 only while it fails over, and its metrics name the new node', async () => {
    const tokens = join(mkdtempSync(join(tmpdir(), 'failover-gateway-')), 'tokens.json');
    writeFileSync(tokens, JSON.stringify({ 'failover-token': '@failover-gateway:example.org' }));
    const gateway = await startServiceProcess(
      'src/gateway-main.ts',
      {
        ...process.env,
        AMQP_URL: clusterUrls(),
        RPC_QUEUE: names.queue,
        RPC_READ_QUEUE: names.amqp.readQueue,
        AUTH_KIND: 'token-file',
        AUTH_TOKEN_FILE: tokens,
        GATEWAY_HOST: '127.0.0.1',
        GATEWAY_PORT: '0',
        GATEWAY_REQUEST_TIMEOUT_MS: '3000',
        HEALTH_HOST: '127.0.0.1',
        HEALTH_PORT: '0',
        LOG_LEVEL: 'info',
      },
      'gateway listening',
    );
    try {
      const port = String(gateway.lines.find((l) => l['msg'] === 'gateway listening')?.['port']);
      const pushRules = `http://127.0.0.1:${port}/_matrix/client/v3/pushrules/`;
      const get = async () => (await fetch(pushRules, { headers: { authorization: 'Bearer failover-token' } })).status;
      expect(await get()).toBe(200);
      const node = nodeOfBroker(gateway.lines.find((l) => l['msg'] === 'connected to RabbitMQ')?.['broker']);
      if (node === undefined) throw new Error('the gateway logged no broker');

      const statuses: { at: number; status: number }[] = [];
      const state = { running: true };
      const poller = (async () => {
        while (state.running) {
          statuses.push({ at: Date.now(), status: await get() });
          await sleep(50);
        }
      })();
      await sleep(1_000);
      const killedAt = Date.now();
      await kill(node);
      await sleep(6_000);
      state.running = false;
      await poller;

      expect(new Set(statuses.map((s) => s.status))).toSatisfy((set: Set<number>) =>
        [...set].every((status) => status === 200 || status === 503),
      );
      const errors = statuses.filter((s) => s.status !== 200);
      // Errors only while failing over: none before the kill, none in the last seconds.
      expect(errors.every((e) => e.at >= killedAt && e.at < killedAt + SERVE_AGAIN_WITHIN_MS)).toBe(true);
      expect(statuses.slice(-10).map((s) => s.status)).toEqual(Array.from({ length: 10 }, () => 200));
      const health = String(gateway.lines.find((l) => l['msg'] === 'health and metrics listening')?.['port']);
      const metrics = await (await fetch(`http://127.0.0.1:${health}/metrics`)).text();
      expect(metrics).toContain(`push_gateway_amqp_connected{broker="127.0.0.1:${node.port}"} 0`);
      expect(metrics).toMatch(/push_gateway_amqp_connected\{broker="127\.0\.0\.1:\d+"\} 1/);
      console.info(
        `[fault: cluster node of the gateway killed] ${node.name} killed; ${statuses.length} GETs: ${JSON.stringify(tally(statuses.map((s) => String(s.status))))}; ` +
          `503s from ${errors.length === 0 ? '–' : `${(errors[0]?.at ?? 0) - killedAt} ms to ${(errors.at(-1)?.at ?? 0) - killedAt} ms`} after the kill`,
      );
    } finally {
      await stopWorkerProcess(gateway, 'SIGKILL');
    }
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

  it('a worker starts and serves while a node of three is down, the classic read and evaluate queues homed there', async () => {
    const home = nodes[2];
    if (home === undefined) throw new Error('no node c');
    // Fresh queue names, declared through `home`: a classic queue lives on the node that declared it.
    const own = uniqueNames();
    const fresh: Names = { ...own, amqp: { ...own.amqp, url: home.url } };
    const evaluateQueue = `${fresh.amqp.queue}.evaluate`;
    const connection = await connectAmqp(home.url);
    const channel = await connection.createChannel();
    for (const queue of [fresh.amqp.readQueue, evaluateQueue]) {
      await channel.assertQueue(queue, {
        durable: true,
        arguments: { 'x-queue-type': 'classic', 'x-dead-letter-exchange': fresh.amqp.deadLetterExchange },
      });
    }
    await connection.close();
    await kill(home);

    const started = Date.now();
    const worker = await startWorkerProcess(workerEnvironment(fresh, { AMQP_URL: clusterUrls(), LOG_LEVEL: 'info' }));
    workers.push(worker);
    const startMs = Date.now() - started;
    const readiness = await fetch(`${worker.healthUrl}/readyz`);
    expect(readiness.status).toBe(200);
    const freshClient = new RpcClient({
      url: nodes.filter((n) => n !== home).map((n) => n.url),
      queue: fresh.queue,
      timeoutMs: 5_000,
      readQueue: fresh.amqp.readQueue,
    });
    try {
      const user = '@started-degraded:example.org';
      expect((await freshClient.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
      expect(
        (
          await freshClient.request({
            op: 'set_pushrule',
            user_id: user,
            scope: 'global',
            kind: 'room',
            rule_id: '!x:example.org',
            rule: { actions: [] },
          })
        ).ok,
      ).toBe(true);
      // A read while the read queue is down goes to the request queue.
      expect(
        await freshClient.request(
          { op: 'get_pushrule_enabled', user_id: user, scope: 'global', kind: 'room', rule_id: '!x:example.org' },
          { read: true },
        ),
      ).toEqual({
        ok: true,
        body: { enabled: true },
      });
      // The delivery queue is a quorum queue like the request queue: not what this test is about.
      const consuming = async () =>
        (
          (await (await fetch(`${worker.healthUrl}/metrics`)).text()).match(
            /push_worker_queue_consuming\{queue="(\w+)"\} 1/g,
          ) ?? []
        ).filter((line) => !line.includes('"deliver"'));
      expect(await consuming()).toEqual(['push_worker_queue_consuming{queue="request"} 1']);

      await revive(home);
      const deadline = Date.now() + 30_000;
      while ((await consuming()).length < 3 && Date.now() < deadline) await sleep(250);
      expect((await consuming()).sort()).toEqual([
        'push_worker_queue_consuming{queue="evaluate"} 1',
        'push_worker_queue_consuming{queue="read"} 1',
        'push_worker_queue_consuming{queue="request"} 1',
      ]);
      console.info(
        `[fault: worker started with a node down] started and ready in ${startMs} ms with ${home.name} down; consumed its queues again once it was back`,
      );
    } finally {
      await freshClient.close();
      await stopWorkerProcess(worker, 'SIGTERM');
      await deleteTopology(fresh).catch(() => undefined);
      await mongo
        .db(fresh.database)
        .dropDatabase()
        .catch(() => undefined);
    }
  });
});
