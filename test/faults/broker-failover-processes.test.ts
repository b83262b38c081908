import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/rpc-client.js';
import { connectAmqp } from '../../src/amqp/amqp-connect.js';
import { deleteTopology, uniqueNames, type Names } from '../integration/support/worker-harness.js';
import {
  startServiceProcess,
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
} from '../integration/support/worker-processes.js';
import {
  clusterUrls,
  kill,
  mongo,
  names,
  nodeOfBroker,
  nodes,
  revive,
  SERVE_AGAIN_WITHIN_MS,
  useFailoverWorld,
  workers,
} from './support/failover-world.js';
import { tally } from './support/load.js';

// The gateway across the loss of a node, and a worker that starts with a node down.
// Writes across the loss of a node are in broker-failover.test.ts.

useFailoverWorld();

describe('a three-node broker cluster losing a node', () => {
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
