import { Writable } from 'node:stream';
import amqp, { type ConsumeMessage } from 'amqplib';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { declarePartitionQueue, PartitionQueues, type PartVerdict } from '../../src/consumer/partition-queues.js';
import { partitionQueue } from '../../src/consumer/notify-queue.js';
import type { Config } from '../../src/config/config-schema.js';
import { createLogger } from '../../src/logging/logger.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import { uniqueNames } from './support/worker-harness.js';

/**
 * The partition queues against the real broker: what its single active
 * consumer does when one worker lets a partition go while another already
 * waits for it (the lost-lease path), and one queue that cannot be consumed.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

const PREFETCH = 4;
const PARTS = 12;

function aPool() {
  const names = uniqueNames();
  const delivery: Config['delivery'] = {
    ...DEFAULT_CONFIG.delivery,
    queue: `${names.queue}.deliver`,
    prefetch: PREFETCH,
  };
  const queueOf = (partition: number) => partitionQueue(delivery, partition);
  /** A worker's consumers; `handle` decides each part's verdict. */
  const aWorker = (handle: (n: number) => Promise<PartVerdict>, logger = createLogger('silent')) => {
    const worker = new PartitionQueues({
      amqp: names.amqp,
      delivery,
      logger,
      queueOf,
      handle: async (_partition, message: ConsumeMessage) => handle(Number(message.content.toString('utf8'))),
    });
    worker.start();
    cleanups.push(async () => worker.close());
    return worker;
  };
  const broker = async () => {
    const connection = await amqp.connect(names.amqp.url);
    const channel = await connection.createConfirmChannel();
    cleanups.push(async () => {
      for (let partition = 0; partition < 4; partition += 1) await channel.deleteQueue(queueOf(partition));
      await connection.close();
    });
    return channel;
  };
  return { names, delivery, queueOf, aWorker, broker };
}

describe('partition queues on the broker', () => {
  it('a worker letting a partition go while another waits: its returned parts reach the next one before newer ones', async () => {
    const pool = aPool();
    const channel = await pool.broker();
    const queue = pool.queueOf(0);
    await declarePartitionQueue(channel, queue, pool.delivery, pool.names.amqp);
    for (let n = 1; n <= PARTS; n += 1) channel.sendToQueue(queue, Buffer.from(String(n)), { persistent: true });
    await channel.waitForConfirms();

    // A takes the first parts in and cannot store them (its lease was lost): they are to be returned.
    const seenByA: number[] = [];
    let returnAll: () => void = () => undefined;
    const returned = new Promise<PartVerdict>((resolve) => {
      returnAll = () => {
        resolve('requeue');
      };
    });
    const a = pool.aWorker(async (n) => {
      seenByA.push(n);
      return returned;
    });
    await vi.waitFor(
      async () => {
        await a.subscribe(0);
        expect(seenByA).toEqual([1, 2, 3, 4]);
      },
      { timeout: 15_000, interval: 100 },
    );
    // B took the lease over and subscribes: the broker keeps it waiting behind A. (B's session is up once it
    // took in a part of another partition; its subscribe then resolves with its consumer registered.)
    await declarePartitionQueue(channel, pool.queueOf(1), pool.delivery, pool.names.amqp);
    channel.sendToQueue(pool.queueOf(1), Buffer.from('0'), { persistent: true });
    await channel.waitForConfirms();
    const seenByB: number[] = [];
    const b = pool.aWorker(async (n) => {
      seenByB.push(n);
      return Promise.resolve('ack');
    });
    await vi.waitFor(
      async () => {
        await b.subscribe(1);
        expect(seenByB).toEqual([0]);
      },
      { timeout: 15_000, interval: 100 },
    );
    seenByB.length = 0;
    await b.subscribe(0);
    expect(seenByB).toEqual([]);
    returnAll();
    await a.unsubscribe(0);
    await vi.waitFor(
      () => {
        expect(seenByB).toHaveLength(PARTS);
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(seenByB).toEqual(Array.from({ length: PARTS }, (_, index) => index + 1));
  });

  it('a partition queue that cannot be consumed fails its own subscribe only: the others are consumed', async () => {
    const pool = aPool();
    const channel = await pool.broker();
    // Partition 1's queue exists with other arguments (declared by hand, say): declaring it as a partition queue fails.
    await channel.assertQueue(pool.queueOf(1), { durable: true, arguments: { 'x-queue-type': 'classic' } });
    await declarePartitionQueue(channel, pool.queueOf(0), pool.delivery, pool.names.amqp);
    channel.sendToQueue(pool.queueOf(0), Buffer.from('1'), { persistent: true });
    await channel.waitForConfirms();
    const seen: number[] = [];
    const worker = pool.aWorker(async (n) => {
      seen.push(n);
      return Promise.resolve('ack');
    });
    await vi.waitFor(
      async () => {
        await worker.subscribe(0);
        expect(seen).toEqual([1]);
      },
      { timeout: 15_000, interval: 100 },
    );
    await expect(worker.subscribe(1)).rejects.toThrow(/cannot consume delivery partition 1/);
    // Partition 0 is still consumed on the same session.
    channel.sendToQueue(pool.queueOf(0), Buffer.from('2'), { persistent: true });
    await channel.waitForConfirms();
    await vi.waitFor(
      () => {
        expect(seen).toEqual([1, 2]);
      },
      { timeout: 15_000, interval: 50 },
    );
  });

  it('consumes every partition subscribed while its session is being set up', async () => {
    const pool = aPool();
    const channel = await pool.broker();
    for (let partition = 0; partition < 4; partition += 1) {
      await declarePartitionQueue(channel, pool.queueOf(partition), pool.delivery, pool.names.amqp);
      channel.sendToQueue(pool.queueOf(partition), Buffer.from(String(partition)), { persistent: true });
    }
    await channel.waitForConfirms();
    const seen: number[] = [];
    // The coordinator subscribes partition after partition as it claims them: here the next three come the
    // moment the session set-up has opened the first (its log line), while the set-up is still under way.
    let more: () => void = () => undefined;
    const lines = new Writable({
      write(chunk: Buffer, _encoding, done) {
        if (chunk.toString('utf8').includes(`"queue":"${pool.queueOf(0)}"`)) more();
        done();
      },
    });
    const worker = pool.aWorker(
      async (n) => {
        seen.push(n);
        return Promise.resolve('ack');
      },
      pino({ level: 'debug' }, lines),
    );
    more = () => {
      more = () => undefined;
      for (const partition of [1, 2, 3]) void worker.subscribe(partition);
    };
    await worker.subscribe(0);
    await vi.waitFor(
      () => {
        expect([...seen].sort()).toEqual([0, 1, 2, 3]);
      },
      { timeout: 10_000, interval: 50 },
    );
  });
});
