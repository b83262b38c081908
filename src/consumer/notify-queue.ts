import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { failureOutcome } from '../service/failure-reply.js';
import { failure, success } from '../contract/reply.js';
import type { ConsumedQueue } from './consumed-queue.js';
import { derivedMessageId } from './derived-message-id.js';
import { parseNotifyRequest, type NotifyLimits } from './notify-request.js';
import { RouterStoppedError, type NotifyRouter } from './notify-router.js';
import { declarePartitionQueue } from './partition-queues.js';
import { partitionName } from '../delivery/partitions.js';

export interface NotifyQueueOptions {
  readonly amqp: Config['amqp'];
  readonly delivery: Config['delivery'];
  readonly maxJsonDepth: number;
  readonly router: Pick<NotifyRouter, 'route'>;
  /** The router's clock (tests). */
  readonly now?: () => number;
}

/** The delivery queue's limits on a `notify` (also applied to each part on a partition queue). */
export function notifyLimits(delivery: Config['delivery'], maxJsonDepth: number): NotifyLimits {
  return {
    maxRequestBytes: delivery.maxRequestBytes,
    maxJsonDepth,
    maxRecipients: delivery.maxRecipients,
  };
}

/** The queue a partition's parts wait in: `<delivery queue>.p007`. */
export function partitionQueue(delivery: Pick<Config['delivery'], 'queue'>, partition: number): string {
  return `${delivery.queue}.${partitionName(partition)}`;
}

/**
 * The delivery queue: `notify` messages (docs/delivery.md), on a channel
 * of its own so that deliveries never take capacity from requests, reads
 * or evaluations. Declared with a single active consumer: one worker at a
 * time takes the messages, in publish order, checks each and routes it to
 * the partition queues of its recipients (notify-router.ts), which every
 * worker of the pool shares. No delivery limit: a `notify` the broker
 * confirmed must not be dropped because workers restarted while holding
 * it, and nothing in it can crash a worker past the checks (a refused one
 * is dead-lettered at once).
 */
export function notifyQueue(options: NotifyQueueOptions): ConsumedQueue {
  const { amqp, delivery, router } = options;
  const limits = notifyLimits(delivery, options.maxJsonDepth);
  const now = options.now ?? Date.now;
  const windowMs = delivery.derivedIdWindowSeconds * 1000;
  return {
    role: 'deliver',
    queue: delivery.queue,
    prefetch: delivery.prefetch,
    // Requests are served without it: a node that holds it going down stops only deliveries.
    required: false,
    replyOptional: true,
    deadLetterRefusals: true,
    ignoresDeadline: true,
    declare: async (channel: Channel) => {
      await channel.assertQueue(delivery.queue, {
        durable: true,
        arguments: {
          'x-queue-type': delivery.queueType,
          'x-single-active-consumer': true,
          'x-dead-letter-exchange': amqp.deadLetterExchange,
        },
      });
      // Every partition queue exists before the first part is published to it (a part no queue takes is refused).
      for (let partition = 0; partition < delivery.partitions; partition += 1)
        await declarePartitionQueue(channel, partitionQueue(delivery, partition), delivery, amqp);
    },
    serve: async (body, context) => {
      try {
        const parsed = parseNotifyRequest(body, limits);
        if (!parsed.ok) return { reply: failure(parsed.error), conflicts: 0, op: 'notify' };
        // With trusted publishers, only they got here; without any, nobody may send it.
        if (amqp.trustedPublishers.length === 0)
          return {
            reply: failure(matrixError('Forbidden', MESSAGES.notifyWithoutTrustedPublishers)),
            conflicts: 0,
            op: 'notify',
          };
        const receivedAt = now();
        // Without one, the same message redelivered must route the same parts, and a later publish new ones.
        const messageId =
          context.messageId ??
          derivedMessageId(
            body,
            { timestamp: context.publishedAt, correlationId: context.correlationId, receivedAt },
            windowMs,
          );
        // Its maximum age counts from here (a publisher's clock ahead of the pool's counts as now).
        const publishedAt = Math.min(context.publishedAt ?? receivedAt, receivedAt);
        const counts = await router.route(parsed.value, messageId, context.answered === true, publishedAt);
        return {
          reply: success({
            recipients: counts?.recipients ?? 0,
            devices: counts?.devices ?? 0,
            ...(counts?.pending === undefined || counts.pending === 0 ? {} : { pending: counts.pending }),
          }),
          conflicts: 0,
          op: 'notify',
        };
      } catch (error) {
        if (error instanceof RouterStoppedError)
          return { reply: failureOutcome(error).reply, conflicts: 0, op: 'notify', requeue: true };
        // Parsing and the router answer every refusal; this is a bug, and the caller still gets an answer.
        return { ...failureOutcome(error), conflicts: 0, op: 'notify' };
      }
    },
  };
}
