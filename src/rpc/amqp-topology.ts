import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';

/**
 * Declares what the worker consumes from and publishes to. Every worker
 * declares the same things with the same arguments (a mismatch is a
 * PRECONDITION_FAILED channel error, so the settings must agree across the
 * pool).
 *
 * - the request queue: durable; quorum by default, so a message that keeps
 *   killing workers is dead-lettered after `deliveryLimit` deliveries
 *   instead of looping forever;
 * - a fanout dead-letter exchange and a parking queue bound to it, where
 *   unanswerable and poison requests end up for an operator to inspect;
 * - the topic exchange for change events.
 */
export async function declareTopology(channel: Channel, amqp: Config['amqp']): Promise<void> {
  await channel.assertExchange(amqp.deadLetterExchange, 'fanout', { durable: true });
  await channel.assertQueue(amqp.deadLetterQueue, { durable: true });
  await channel.bindQueue(amqp.deadLetterQueue, amqp.deadLetterExchange, '');
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
