import { EventEmitter } from 'node:events';
import type { ChannelModel } from 'amqplib';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PartitionQueues } from '../../src/consumer/partition-queues.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import { eventually } from '../support/eventually.js';

/** A step the test lets through when it wants: a queue declaration held open. */
function gate(): { readonly wait: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

/** A channel as far as the partition queues use it; `assertQueue` waits on `held` for the queues listed there. */
class FakeChannel extends EventEmitter {
  closed = false;
  constructor(
    private readonly broker: FakeBroker,
    private readonly id: number,
  ) {
    super();
  }

  async assertQueue(queue: string): Promise<void> {
    await this.broker.held.get(queue)?.wait;
  }

  async prefetch(): Promise<void> {
    await Promise.resolve();
  }

  async consume(queue: string): Promise<void> {
    await Promise.resolve();
    this.broker.consumers.set(queue, this.id);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const [queue, id] of this.broker.consumers) if (id === this.id) this.broker.consumers.delete(queue);
    await Promise.resolve();
  }
}

/** The broker: which queue has a consumer (on which channel), and declarations held back. */
class FakeBroker {
  readonly consumers = new Map<string, number>();
  readonly held = new Map<string, ReturnType<typeof gate>>();
  #channels = 0;

  readonly connect = async (): Promise<ChannelModel> => {
    await Promise.resolve();
    const connection = Object.assign(new EventEmitter(), {
      createChannel: async () => {
        await Promise.resolve();
        this.#channels += 1;
        return new FakeChannel(this, this.#channels);
      },
      close: async () => {
        await Promise.resolve();
      },
    });
    return connection as unknown as ChannelModel;
  };
}

const queueOf = (partition: number) => `q.p${String(partition).padStart(3, '0')}`;
const started: PartitionQueues[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map(async (queues) => queues.close()));
});

function partitionQueues(broker: FakeBroker): PartitionQueues {
  const queues = new PartitionQueues({
    amqp: { ...DEFAULT_CONFIG.amqp, url: ['amqp://a:5672'] },
    delivery: DEFAULT_CONFIG.delivery,
    logger: pino({ level: 'silent' }),
    handle: async () => Promise.resolve('ack'),
    queueOf,
    connect: broker.connect,
  });
  started.push(queues);
  return queues;
}

describe('PartitionQueues, while its broker session is being set up', () => {
  it('consumes a partition subscribed after the set-up listed the wanted ones', async () => {
    const broker = new FakeBroker();
    const first = gate();
    broker.held.set(queueOf(0), first);
    const queues = partitionQueues(broker);
    await queues.subscribe(0);
    queues.start();
    // The set-up is opening partition 0 (held); the coordinator claims more partitions meanwhile.
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.all([queues.subscribe(1), queues.subscribe(2)]);
    first.open();
    await eventually(() => {
      expect([...broker.consumers.keys()].sort()).toEqual([queueOf(0), queueOf(1), queueOf(2)]);
    }, 2_000);
  });

  it('lets go of a partition unsubscribed while it is being opened', async () => {
    const broker = new FakeBroker();
    const held = gate();
    broker.held.set(queueOf(3), held);
    const queues = partitionQueues(broker);
    await queues.subscribe(4);
    queues.start();
    // The session is live once partition 4 is consumed.
    await eventually(() => {
      expect(broker.consumers.has(queueOf(4))).toBe(true);
    }, 2_000);
    const subscribing = queues.subscribe(3);
    await new Promise((resolve) => setImmediate(resolve));
    const unsubscribing = queues.unsubscribe(3);
    held.open();
    await Promise.all([subscribing, unsubscribing]);
    await new Promise((resolve) => setImmediate(resolve));
    expect([...broker.consumers.keys()]).toEqual([queueOf(4)]);
  });
});
