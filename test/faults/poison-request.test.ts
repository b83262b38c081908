import { setTimeout as sleep } from 'node:timers/promises';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcTransportError } from '../../src/client/rpc-errors.js';
import type { WorkerProcess } from '../integration/support/worker-processes.js';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { runLoad, tally } from './support/load.js';

/**
 * A request that kills every worker it reaches (test-only fault injection:
 * FAULT_CRASH_ON_USER_ID). Each crash returns it to the quorum queue with
 * its delivery count raised; past `amqp.deliveryLimit` the broker moves
 * it to the dead-letter queue. A supervisor (here the test, in production
 * the orchestrator) restarts the workers.
 *
 * What the design guarantees, and so what this asserts: the poison ends in
 * the dead-letter queue for its delivery limit and its caller gets no reply;
 * nothing else is lost — requests delivered in the same batch as the poison
 * are returned with it on every crash and may be dead-lettered with it, and
 * their callers retry them (same messageId) until they are answered, each
 * applied once; and the workers serve again once the poison is parked.
 * Whether other requests happen to be answered *between* crashes depends on
 * how the broker batches deliveries and how fast workers restart, so that is
 * reported, not asserted.
 */
const POISON = '@poison:example.org';
/** Above the default 5, so that the poison lives through several crashes and restarts. */
const DELIVERY_LIMIT = 10;
const USER = '@bystander:example.org';
const SERVE_AGAIN_WITHIN_MS = 30_000;
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
  it('ends in the dead-letter queue after the delivery limit; nothing else is lost, and the workers serve again', async () => {
    const connection = await amqp.connect(world.names.amqp.url);
    const channel = await connection.createChannel();
    const state = { running: true };
    // Each write sets actions no other one sets: each is a change, so the
    // stored version counts the writes applied.
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
        body: {
          op: 'set_pushrule_actions',
          user_id: USER,
          scope: 'global',
          kind: 'override',
          rule_id: '.m.rule.master',
          actions: [{ set_tweak: 'sound', value: `bystander-${i}` }],
        },
      }),
    });
    const sentAt = Date.now();
    const poisoned = world.client
      .request({ op: 'get_pushrules', user_id: POISON }, { timeoutMs: 90_000, messageId: 'poison-1' })
      .catch((error: unknown) => error);

    const parkedMessages: amqp.GetMessage[] = [];
    const drainDeadLetters = async () => {
      for (;;) {
        const message = await channel.get(world.names.amqp.deadLetterQueue, { noAck: true });
        if (message === false) return;
        parkedMessages.push(message);
      }
    };
    const isPoison = (m: amqp.GetMessage) => m.properties.messageId === 'poison-1';
    while (!parkedMessages.some(isPoison) && Date.now() - sentAt < 90_000) {
      await drainDeadLetters();
      if (!parkedMessages.some(isPoison)) await sleep(200);
    }
    const parkedAt = Date.now();

    // The workers serve again: a request sent now is answered.
    let servedAgain: { ok: boolean; ms: number } | undefined;
    while (servedAgain === undefined && Date.now() - parkedAt < SERVE_AGAIN_WITHIN_MS) {
      const reply = await world.client
        .request(
          { op: 'get_pushrule_enabled', user_id: USER, scope: 'global', kind: 'override', rule_id: '.m.rule.master' },
          { timeoutMs: 5_000 },
        )
        .catch(() => undefined);
      if (reply !== undefined) servedAgain = { ok: reply.ok, ms: Date.now() - parkedAt };
    }

    state.running = false;
    const outcomes = await load;
    // Anything dead-lettered after the poison (the rest of its last batch).
    await drainDeadLetters();
    await world.client.close();
    await connection.close();

    // The poison: dead-lettered by the broker for reaching the delivery limit, never answered.
    const parked = parkedMessages.find(isPoison);
    expect(parked, 'the poison request in the dead-letter queue').toBeDefined();
    if (parked === undefined) return;
    expect(JSON.parse(parked.content.toString())).toEqual({ op: 'get_pushrules', user_id: POISON });
    // The broker's own account of it (RabbitMQ keeps no x-delivery-count on
    // the dead-lettered copy; x-death says why and from where, once).
    const headers = (parked.properties.headers ?? {}) as {
      'x-death'?: { reason?: string; queue?: string; count?: number }[];
    };
    expect(headers['x-death']).toMatchObject([{ reason: 'delivery_limit', queue: world.names.queue, count: 1 }]);
    expect(await poisoned).toBeInstanceOf(RpcTransportError);

    // Nothing else lost: whatever was dead-lettered with it is a request
    // the load sent, and every request the load sent was answered ok in the
    // end (callers retried the dead-lettered ones with the same messageId).
    const others = parkedMessages.filter((m) => !isPoison(m));
    const sent = new Map(outcomes.map((o) => [o.request.messageId, o]));
    expect(others.filter((m) => !sent.has(String(m.properties.messageId)))).toEqual([]);
    expect(tally(outcomes.map((o) => o.outcome))).toEqual({ ok: outcomes.length });
    // Each applied once, however often delivered: get_pushrules stored version 1.
    expect((await world.stored(USER)).version).toBe(1 + outcomes.length);

    expect(servedAgain?.ok, `a request answered within ${SERVE_AGAIN_WITHIN_MS} ms of the poison being parked`).toBe(
      true,
    );

    const crashes = logLines(world, 'fault injection: crashing').length;
    const servedMeanwhile = outcomes.filter((o) => o.doneAt < parkedAt).length;
    console.info(
      `[fault: poison] dead-lettered for delivery_limit after ${parkedAt - sentAt} ms (delivery limit ${DELIVERY_LIMIT}, ` +
        `at least ${crashes} crashes seen in logs); ` +
        `${others.length} other requests dead-lettered with it, all answered after retries; ` +
        `${outcomes.length} writes all answered ok and applied once (${servedMeanwhile} before the poison was parked, ` +
        `${outcomes.filter((o) => o.failedAttempts.length > 0).length} retried by their callers); ` +
        `a new request answered ${servedAgain?.ms ?? '?'} ms after the poison was parked`,
    );
  });
});
