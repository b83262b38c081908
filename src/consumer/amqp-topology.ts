import type { Channel, ChannelModel } from 'amqplib';
import type { Config } from '../config/config-schema.js';

/**
 * Declares what the worker needs to serve. Every worker declares the same
 * things with the same arguments (a mismatch is a PRECONDITION_FAILED
 * channel error, so the settings must agree across the pool).
 *
 * - the request queue: durable; quorum by default, so that it survives the
 *   loss of a node of a cluster, and so that a message that keeps killing
 *   workers is dead-lettered after `deliveryLimit` deliveries instead of
 *   looping forever;
 * - the fanout dead-letter exchange its unanswerable requests go to (the
 *   queue behind it is `declareDeadLetterQueue`'s);
 * - the topic exchange for change events.
 *
 * Exchanges are cluster-wide metadata: any running node declares them.
 */
export async function declareTopology(channel: Channel, amqp: Config['amqp']): Promise<void> {
  await channel.assertExchange(amqp.deadLetterExchange, 'fanout', { durable: true });
  await channel.assertQueue(amqp.queue, {
    durable: true,
    arguments: {
      'x-queue-type': amqp.queueType,
      'x-dead-letter-exchange': amqp.deadLetterExchange,
      ...(amqp.queueType === 'quorum' ? { 'x-delivery-limit': amqp.deliveryLimit } : {}),
    },
  });
  await channel.assertExchange(amqp.eventsExchange, 'topic', { durable: true });
}

/**
 * The exchanges alone (dead-letter, change events), for a worker that
 * does not consume the request queue, whose declaration brings them
 * otherwise; on a channel of its own, closed after.
 */
export async function declareExchanges(connection: ChannelModel, amqp: Config['amqp']): Promise<void> {
  const channel = await connection.createChannel();
  // A refused declaration rejects the call below (and fails the session's attempt); the event is the same news.
  channel.on('error', () => undefined);
  try {
    await channel.assertExchange(amqp.deadLetterExchange, 'fanout', { durable: true });
    await channel.assertExchange(amqp.eventsExchange, 'topic', { durable: true });
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/** Just enough of a logger to warn; tests pass object literals. */
export interface TopologyLog {
  warn(fields: object, message: string): void;
}

/**
 * The parking queue behind the dead-letter exchange, where unanswerable and
 * poison requests end up for an operator to inspect. Quorum by default, so
 * it lives through the loss of a node. Nothing is served from it, so it is
 * declared on a channel of its own and a failure only warns: a classic
 * queue homed on a node that is down (`404 … home node … is down`) or one
 * declared earlier with other arguments (`406 PRECONDITION_FAILED`: it is
 * kept as it is) must not stop a worker from serving. Returns whether it
 * is declared and bound.
 */
export async function declareDeadLetterQueue(
  connection: ChannelModel,
  amqp: Config['amqp'],
  log: TopologyLog,
): Promise<boolean> {
  const queue = amqp.deadLetterQueue;
  const declared = await onScratchChannel(connection, async (channel) => {
    await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': amqp.deadLetterQueueType } });
  });
  if (declared !== undefined) {
    log.warn(
      { err: declared, queue },
      'cannot declare the dead-letter queue; serving without it (unanswerable requests are dropped until it is back)',
    );
  }
  // Bound whether declared now or before, with other arguments.
  const bound = await onScratchChannel(connection, async (channel) => {
    await channel.bindQueue(queue, amqp.deadLetterExchange, '');
  });
  if (bound !== undefined && declared === undefined)
    log.warn({ err: bound, queue }, 'cannot bind the dead-letter queue; serving without it');
  return declared === undefined && bound === undefined;
}

/** Runs `use` on a channel of its own (a failure closes only that channel); the error, if any. */
async function onScratchChannel(connection: ChannelModel, use: (channel: Channel) => Promise<void>): Promise<unknown> {
  let channel: Channel | undefined;
  try {
    channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await use(channel);
    return undefined;
  } catch (error) {
    return error ?? new Error('failed');
  } finally {
    await channel?.close().catch(() => undefined);
  }
}

/**
 * The read queue: read-only ops only, classic by default. A read changes
 * nothing a retry cannot redo, so it needs no replicated log; a classic
 * queue's round trip costs about a third of a quorum queue's. Unanswerable
 * requests go to the same dead-letter exchange as the request queue's.
 */
export async function declareReadQueue(channel: Channel, amqp: Config['amqp']): Promise<void> {
  await channel.assertQueue(amqp.readQueue, {
    durable: true,
    arguments: {
      'x-queue-type': amqp.readQueueType,
      'x-dead-letter-exchange': amqp.deadLetterExchange,
      ...(amqp.readQueueType === 'quorum' ? { 'x-delivery-limit': amqp.deliveryLimit } : {}),
    },
  });
}
