import type { ChannelModel } from 'amqplib';
import type { BrokerLink } from '../../src/amqp/broker-link.js';
import type { ConsumedQueue } from '../../src/consumer/consumed-queue.js';

/**
 * A broker connection that logs every call a consumer session makes on
 * it, in order (`assertExchange <name>`, `consume <queue>`, …); consuming
 * a queue named in `refuse` fails, as a queue homed on a node that is
 * down does.
 */
export function brokerLinkDouble(refuse: ReadonlySet<string> = new Set()) {
  const calls: string[] = [];
  const channel = () => ({
    on: () => undefined,
    assertExchange: async (name: string) => {
      calls.push(`assertExchange ${name}`);
      return Promise.resolve({ exchange: name });
    },
    assertQueue: async (name: string) => {
      const queue = name === '' ? 'amq.gen-events' : name;
      calls.push(`assertQueue ${queue}`);
      return Promise.resolve({ queue, messageCount: 0, consumerCount: 0 });
    },
    bindQueue: async (queue: string, exchange: string, key: string) => {
      calls.push(`bind ${queue} ${exchange} ${key}`);
      return Promise.resolve({});
    },
    prefetch: async () => Promise.resolve(),
    consume: async (queue: string) => {
      if (refuse.has(queue)) throw new Error(`cannot consume ${queue}: its node is down`);
      calls.push(`consume ${queue}`);
      return Promise.resolve({ consumerTag: `tag-${queue}` });
    },
    cancel: async () => Promise.resolve(),
    close: async () => Promise.resolve(),
  });
  const connection = {
    createChannel: async () => Promise.resolve(channel()),
    createConfirmChannel: async () => Promise.resolve(channel()),
  };
  const link: BrokerLink = {
    connection: connection as unknown as ChannelModel,
    address: { label: 'localhost:5672' } as unknown as BrokerLink['address'],
    lost: false,
    lose: () => undefined,
  };
  return { calls, link };
}

/** A queue a session consumes, answering `{}` to everything. */
export function aConsumedQueue(role: string, name: string, required: boolean): ConsumedQueue {
  return {
    role,
    queue: name,
    prefetch: 1,
    required,
    declare: async () => Promise.resolve(),
    serve: async () => Promise.resolve({ reply: { ok: true, body: {} }, conflicts: 0 }),
  };
}
