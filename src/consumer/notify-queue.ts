import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { IntakeStoppedError, type IntakeResult } from '../delivery-service/notify-intake.js';
import type { NotifyRequestBody } from '../contract/ops.js';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { failureOutcome } from '../service/failure-reply.js';
import { failure, success } from '../contract/reply.js';
import type { ConsumedQueue } from './consumed-queue.js';
import { parseNotifyRequest, type NotifyLimits } from './notify-request.js';

/** The intake, as the queue uses it (delivery-service/notify-intake.ts). */
export interface NotifyAcceptor {
  accept(request: NotifyRequestBody, messageId: string | undefined): Promise<IntakeResult>;
}

export interface NotifyQueueOptions {
  readonly amqp: Config['amqp'];
  readonly delivery: Config['delivery'];
  readonly maxJsonDepth: number;
  readonly intake: NotifyAcceptor;
}

/**
 * The delivery queue: `notify` messages (docs/delivery.md), on a channel
 * of its own so that slow deliveries never take capacity from requests,
 * reads or evaluations. Declared with a single active consumer: one worker
 * at a time takes the messages, in publish order, which keeps each
 * device's notifications in order; another takes over when it goes. No
 * delivery limit: a `notify` the broker confirmed must not be dropped
 * because workers restarted while holding it, and nothing in it can crash
 * a worker past the checks (a refused one is dead-lettered at once).
 */
export function notifyQueue(options: NotifyQueueOptions): ConsumedQueue {
  const { amqp, delivery, intake } = options;
  const limits: NotifyLimits = {
    maxRequestBytes: delivery.maxRequestBytes,
    maxJsonDepth: options.maxJsonDepth,
    maxRecipients: delivery.maxRecipients,
  };
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
        const result = await intake.accept(parsed.value, context.messageId);
        return {
          reply: success({ recipients: result.recipients, devices: result.devices }),
          conflicts: 0,
          op: 'notify',
          ...(result.replayed ? { replayed: true as const } : {}),
        };
      } catch (error) {
        if (error instanceof IntakeStoppedError)
          return { reply: failureOutcome(error).reply, conflicts: 0, op: 'notify', requeue: true };
        // Parsing and the intake answer every refusal; this is a bug, and the caller still gets an answer.
        return { ...failureOutcome(error), conflicts: 0, op: 'notify' };
      }
    },
  };
}
