import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcTransportError } from '../../src/client/rpc-client.js';
import type { WorkerProcess } from '../integration/support/worker-processes.js';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { runLoad, tally } from './support/load.js';

/**
 * A request that kills every worker it reaches (test-only fault injection:
 * FAULT_CRASH_ON_USER_ID). Each crash returns it to the quorum queue with
 * its delivery count raised; past `amqp.deliveryLimit` the broker moves
 * it to the dead-letter queue. A supervisor (here the test, in production
 * the orchestrator) restarts the workers, and other requests are served
 * all along.
 */
const POISON = '@poison:example.org';
/** Above the default 5, so that the poison lives long enough to show others being served between crashes. */
const DELIVERY_LIMIT = 10;
const USER = '@bystander:example.org';
let world: FaultWorld;
const supervision = { on: true };
const supervising = () => supervision.on;
const supervisors: Promise<void>[] = [];

beforeAll(async () => {
  world = await openFaultWorld(0, { FAULT_CRASH_ON_USER_ID: POISON, RPC_DELIVERY_LIMIT: String(DELIVERY_LIMIT) });
  // Restarts a worker whenever it dies, as an orchestrator would; a worker
  // may die before it has even said it started.
  const supervise = async (): Promise<void> => {
    while (supervising()) {
      let worker: WorkerProcess | undefined;
      try {
        worker = await world.startWorker();
      } catch {
        continue;
      }
      if (!supervising()) {
        // Started while the test was closing: nobody else will stop it.
        worker.child.kill('SIGKILL');
        break;
      }
      if (worker.child.exitCode === null && worker.child.signalCode === null) {
        await new Promise((resolve) => worker.child.once('exit', resolve));
      }
    }
  };
  for (let i = 0; i < 2; i += 1) supervisors.push(supervise());
  while (world.workers.length < 2) await sleep(100);
  expect((await world.client.request({ op: 'get_pushrules', user_id: USER })).ok).toBe(true);
});
afterAll(async () => {
  supervision.on = false;
  await world.close();
  await Promise.all(supervisors);
});

describe('a poison request', () => {
  it('ends in the dead-letter queue after the delivery limit while other requests are served', async () => {
    const connection = await amqp.connect(world.names.amqp.url);
    const channel = await connection.createChannel();
    const state = { running: true };
    const load = runLoad({
      client: world.client,
      concurrency: 4,
      timeoutMs: 5_000,
      retry: true,
      maxAttempts: 20,
      running: () => state.running,
      next: (i) => ({
        user: USER,
        messageId: `bystander-${i}`,
        body: { op: 'set_pushrule_enabled', user_id: USER, scope: 'global', kind: 'override', rule_id: '.m.rule.master', enabled: i % 2 === 0 },
      }),
    });
    const sentAt = Date.now();
    const poisoned = world.client
      .request({ op: 'get_pushrules', user_id: POISON }, { timeoutMs: 90_000, messageId: 'poison-1' })
      .catch((error: unknown) => error);

    // Requests that sat behind the poison in the same prefetch batch are
    // returned with it on every crash, and can reach the limit too.
    const parkedMessages: amqp.GetMessage[] = [];
    const isPoison = (m: amqp.GetMessage) => m.properties.messageId === 'poison-1';
    while (!parkedMessages.some(isPoison) && Date.now() - sentAt < 90_000) {
      const message = await channel.get(world.names.amqp.deadLetterQueue, { noAck: true });
      if (message === false) await sleep(200);
      else parkedMessages.push(message);
    }
    const parkedAt = Date.now();
    const parked = parkedMessages.find(isPoison) ?? false;
    state.running = false;
    const outcomes = await load;
    await world.client.close();
    await connection.close();

    expect(parked).not.toBe(false);
    if (parked === false) return;
    expect(JSON.parse(parked.content.toString())).toEqual({ op: 'get_pushrules', user_id: POISON });
    expect(parked.properties.messageId).toBe('poison-1');
    // The broker's own account: dead-lettered for reaching the delivery limit.
    const headers = (parked.properties.headers ?? {}) as { 'x-death'?: { reason?: string }[] };
    expect(headers['x-death']?.[0]?.reason).toBe('delivery_limit');
    // Workers that died before they said they started are not in the world's logs.
    const crashes = logLines(world, 'fault injection: crashing').length;
    expect(await poisoned).toBeInstanceOf(RpcTransportError);

    const servedMeanwhile = outcomes.filter((o) => o.outcome === 'ok' && o.doneAt < parkedAt);
    expect(servedMeanwhile.length).toBeGreaterThan(0);
    expect(tally(outcomes.map((o) => o.outcome))).toEqual({ ok: outcomes.length });
    // With a messageId, requests returned to the queue by a crash are not applied twice.
    expect((await world.stored(USER)).version).toBe(1 + outcomes.length);
    console.info(
      `[fault: poison] dead-lettered for delivery_limit (at least ${crashes} crashes seen in logs) after ${parkedAt - sentAt} ms ` +
        `(delivery limit ${DELIVERY_LIMIT}); ${servedMeanwhile.length} other writes served meanwhile; ` +
        `${parkedMessages.length - 1} other requests dead-lettered with it, ` +
        `${outcomes.filter((o) => o.failedAttempts.length > 0).length} writes retried by their callers, all applied once`,
    );
  });
});
