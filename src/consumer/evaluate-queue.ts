import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import type { EvaluateService, EvaluateStats } from '../service/evaluate-service.js';
import { failureOutcome } from '../service/failure-reply.js';
import { failure } from '../contract/reply.js';
import { parseEvaluateRequest, type EvaluateLimits } from './evaluate-request.js';
import type { ConsumedQueue } from './consumed-queue.js';

/** Narrow hook for the metrics of each evaluation; tests pass object literals. */
export interface EvaluateObserver {
  evaluated(stats: EvaluateStats): void;
}

export interface EvaluateQueueOptions {
  readonly amqp: Config['amqp'];
  readonly evaluate: Config['evaluate'];
  readonly maxJsonDepth: number;
  readonly service: EvaluateService;
  readonly observer?: EvaluateObserver;
}

/**
 * The `evaluate` op's queue, for `RpcWorker`: declared like the request
 * queue (unanswerable requests dead-lettered to the same exchange; a
 * delivery limit when it is a quorum queue), consumed with its own prefetch.
 */
export function evaluateQueue(options: EvaluateQueueOptions): ConsumedQueue {
  const { amqp, evaluate, service, observer } = options;
  const limits: EvaluateLimits = {
    maxRequestBytes: evaluate.maxRequestBytes,
    maxJsonDepth: options.maxJsonDepth,
    maxEventBytes: evaluate.maxEventBytes,
    maxRecipients: evaluate.maxRecipients,
  };
  return {
    role: 'evaluate',
    queue: evaluate.queue,
    prefetch: evaluate.prefetch,
    // Writes and reads are served without it: a node that holds it going down stops only evaluations.
    required: false,
    declare: async (channel: Channel) => {
      await channel.assertQueue(evaluate.queue, {
        durable: true,
        arguments: {
          'x-queue-type': evaluate.queueType,
          'x-dead-letter-exchange': amqp.deadLetterExchange,
          ...(evaluate.queueType === 'quorum' ? { 'x-delivery-limit': amqp.deliveryLimit } : {}),
        },
      });
    },
    serve: async (body, context) => {
      try {
        const parsed = parseEvaluateRequest(body, limits);
        if (!parsed.ok) return { reply: failure(parsed.error), conflicts: 0, op: 'evaluate' };
        const outcome = await service.handle(parsed.value, { deadline: context.deadline });
        observer?.evaluated(outcome.stats);
        return {
          reply: outcome.reply,
          conflicts: 0,
          op: 'evaluate',
          ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
          ...(outcome.failure === undefined ? {} : { failure: outcome.failure }),
          ...(outcome.deadlinePassed === true ? { deadlinePassed: true as const } : {}),
        };
      } catch (error) {
        // Parsing and the service answer every refusal; this is a bug, and the caller still gets an answer.
        return { ...failureOutcome(error), conflicts: 0, op: 'evaluate' };
      }
    },
  };
}
