import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { RpcWorker } from '../../src/consumer/rpc-worker.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { RpcCaller } from './support/rpc-caller.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';
import { deleteTopology, uniqueNames } from './support/worker-harness.js';

const names = uniqueNames();

afterAll(async () => {
  await deleteTopology(names);
});

/** A store whose reads take `delayMs`, so a request stays in flight long enough to close under it. */
function slowStore(delayMs: number): PushStore {
  const store = new InMemoryPushStore();
  return wrapStore(store, {
    loadPushRules: async (u, id) => {
      await sleep(delayMs);
      return store.loadPushRules(u, id);
    },
  });
}

describe('worker lifecycle', () => {
  it('close() stops consuming, answers what is in flight, and is idempotent', async () => {
    const service = new PushService(slowStore(400), {
      maxWriteAttempts: 3,
      backoff: { baseMs: 1, maxMs: 5 },
      pusherPolicy: { allowInsecureGateways: false },
      limits: DEFAULT_LIMITS,
    });
    const logLines: { msg?: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(JSON.parse(chunk.toString()) as { msg?: string });
        done();
      },
    });
    const worker = new RpcWorker(service, {
      amqp: names.amqp,
      limits: DEFAULT_LIMITS,
      logger: pino({ level: 'info' }, sink),
    });
    await worker.start();
    const caller = await RpcCaller.open(names.amqp.url);
    try {
      const reply = caller.call(names.queue, { op: 'get_pushrules', user_id: '@closing:example.org' });
      for (let i = 0; i < 100 && worker.inFlight === 0; i += 1) await sleep(10);
      expect(worker.inFlight).toBe(1);

      await Promise.all([worker.close(), worker.close()]);
      await worker.close();
      expect(worker.inFlight).toBe(0);
      // The shutdown ran once, however many times close() was called.
      expect(logLines.filter((l) => l.msg === 'worker closed')).toHaveLength(1);
      // No trusted publishers configured: said once, at start.
      expect(
        logLines.filter((l) => l.msg?.includes('any publisher that can reach the queue is trusted') === true),
      ).toHaveLength(1);
      expect((await reply).ok).toBe(true);

      // Nothing consumes any more: a new request waits in the queue.
      await expect(
        caller.call(names.queue, { op: 'get_pushers', user_id: '@closing:example.org' }, {}, 500),
      ).rejects.toThrow(/no reply/);
      const { messageCount } = await caller.channel.checkQueue(names.queue);
      expect(messageCount).toBe(1);
    } finally {
      await caller.close();
    }
  });

  it('a consumer cancelled by the broker is handled like a lost connection: a new session consumes again', async () => {
    const own = uniqueNames();
    const amqp = { ...own.amqp, reconnectBaseMs: 50, reconnectMaxMs: 200 };
    const service = new PushService(new InMemoryPushStore(), {
      maxWriteAttempts: 3,
      backoff: { baseMs: 1, maxMs: 5 },
      pusherPolicy: { allowInsecureGateways: false },
      limits: DEFAULT_LIMITS,
    });
    let reconnects = 0;
    const worker = new RpcWorker(service, {
      amqp,
      limits: DEFAULT_LIMITS,
      logger: pino({ level: 'silent' }),
      observer: { requestSettled: () => undefined, reconnected: () => (reconnects += 1) },
    });
    await worker.start();
    const caller = await RpcCaller.open(amqp.url);
    try {
      expect(worker.consuming).toBe(true);
      // Deleting the queue makes RabbitMQ cancel every consumer on it.
      await caller.channel.deleteQueue(amqp.queue);
      for (let i = 0; i < 200 && reconnects === 0; i += 1) await sleep(10);
      expect(reconnects).toBe(1);
      expect(worker.consuming).toBe(true);
      // The new session declared the queue again and serves from it.
      expect((await caller.call(amqp.queue, { op: 'get_pushers', user_id: '@cancel:example.org' }, {}, 5_000)).ok).toBe(
        true,
      );
    } finally {
      await caller.close();
      await worker.close();
      await deleteTopology(own);
    }
  });
});
