import type { ConsumeMessage } from 'amqplib';
import { IntakeStoppedError, type IntakeResult } from '../delivery-service/notify-intake.js';
import type { NotifyRequestBody } from '../contract/ops.js';
import type { Logger } from '../logging/logger.js';
import { parseNotifyRequest, type NotifyLimits } from './notify-request.js';
import type { PartVerdict } from './partition-queues.js';
import { publishedAtMs } from './publish-time.js';

/** The intake, as a partition queue uses it (delivery-service/notify-intake.ts). */
export interface PartAcceptor {
  accept(
    request: NotifyRequestBody,
    messageId: string | undefined,
    partition: number,
    publishedAt?: number,
  ): Promise<IntakeResult>;
}

export interface NotifyPartHandlerOptions {
  readonly intake: PartAcceptor;
  readonly limits: NotifyLimits;
  /** Who may publish parts: the trusted publishers and this pool's own broker user (the router publishes as it). */
  readonly publishers: ReadonlySet<string>;
  readonly logger: Logger;
}

/**
 * Takes one part off a partition queue: checked like a `notify` (its
 * publisher must be trusted, its body valid), then stored by the intake.
 * A part refused or failing for good is dead-lettered with a log line; one
 * the intake could not store yet (shutdown, handover) goes back to the
 * queue.
 */
export function notifyPartHandler(
  options: NotifyPartHandlerOptions,
): (partition: number, message: ConsumeMessage) => Promise<PartVerdict> {
  const { intake, limits, publishers, logger } = options;
  return async (partition, message) => {
    const { userId, messageId, timestamp } = message.properties as {
      userId?: unknown;
      messageId?: unknown;
      timestamp?: unknown;
    };
    const id = typeof messageId === 'string' && messageId !== '' ? messageId : undefined;
    if (typeof userId !== 'string' || !publishers.has(userId)) {
      logger.warn({ partition, messageId: id }, 'a notify part from an untrusted publisher: dead-lettered');
      return 'dead-letter';
    }
    const parsed = parseNotifyRequest(message.content, limits);
    if (!parsed.ok) {
      logger.warn({ partition, messageId: id, error: parsed.error.message }, 'an invalid notify part: dead-lettered');
      return 'dead-letter';
    }
    try {
      // The router sets the notify's publish time on each part, kept however often the part is taken in.
      await intake.accept(parsed.value, id, partition, publishedAtMs(timestamp));
      return 'ack';
    } catch (error) {
      if (error instanceof IntakeStoppedError) return 'requeue';
      logger.error({ err: error, partition, messageId: id }, 'a notify part cannot be stored: dead-lettered');
      return 'dead-letter';
    }
  };
}
