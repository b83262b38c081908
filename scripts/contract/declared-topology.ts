// What a worker declares on the broker, recorded by running the workers'
// own declaration code (src/consumer/) against a channel that only writes
// the calls down: contract/asyncapi.yaml states these arguments, so they
// are never written twice.
import type { Channel, ChannelModel } from 'amqplib';
import type { Config } from '../../src/config/config-schema.js';
import { declareDeadLetterQueue, declareReadQueue, declareTopology } from '../../src/consumer/amqp-topology.js';
import { evaluateQueue } from '../../src/consumer/evaluate-queue.js';
import { notifyQueue } from '../../src/consumer/notify-queue.js';

export interface DeclaredQueue {
  readonly kind: 'queue';
  readonly name: string;
  readonly durable: boolean;
  readonly arguments: Readonly<Record<string, unknown>>;
}

export interface DeclaredExchange {
  readonly kind: 'exchange';
  readonly name: string;
  readonly type: string;
  readonly durable: boolean;
}

export interface DeclaredBinding {
  readonly kind: 'binding';
  readonly queue: string;
  readonly exchange: string;
  readonly routingKey: string;
}

export type Declared = DeclaredQueue | DeclaredExchange | DeclaredBinding;

interface QueueOptions {
  readonly durable?: boolean;
  readonly arguments?: Record<string, unknown>;
}

function recordingChannel(declared: Declared[]): Channel {
  const channel = {
    assertQueue: async (name: string, options: QueueOptions = {}) => {
      declared.push({ kind: 'queue', name, durable: options.durable === true, arguments: options.arguments ?? {} });
      return Promise.resolve({ queue: name, messageCount: 0, consumerCount: 0 });
    },
    assertExchange: async (name: string, type: string, options: { durable?: boolean } = {}) => {
      declared.push({ kind: 'exchange', name, type, durable: options.durable === true });
      return Promise.resolve({ exchange: name });
    },
    bindQueue: async (queue: string, exchange: string, routingKey: string) => {
      declared.push({ kind: 'binding', queue, exchange, routingKey });
      return Promise.resolve({});
    },
    on: () => channel,
    close: async () => Promise.resolve(),
  };
  return channel as unknown as Channel;
}

/** Everything a worker with `config` declares, in the order it declares it. */
export async function declaredTopology(config: Config): Promise<readonly Declared[]> {
  const declared: Declared[] = [];
  const channel = recordingChannel(declared);
  const connection = { createChannel: async () => Promise.resolve(channel) } as unknown as ChannelModel;
  const { amqp, evaluate, delivery } = config;
  await declareTopology(channel, amqp);
  await declareDeadLetterQueue(connection, amqp, { warn: () => undefined });
  await declareReadQueue(channel, amqp);
  await evaluateQueue({ amqp, evaluate, run: async () => Promise.reject(new Error('not run')) }).declare(channel);
  await notifyQueue({
    amqp,
    delivery,
    maxJsonDepth: config.limits.maxJsonDepth,
    router: { route: async () => Promise.resolve(undefined) },
  }).declare(channel);
  return declared;
}
