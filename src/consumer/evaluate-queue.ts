import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import type { EvaluateService, EvaluateStats } from '../service/evaluate-service.js';
import { failureOutcome } from '../service/failure-reply.js';
import { failure, type Reply } from '../contract/reply.js';
import { parseEvaluateRequest, type EvaluateLimits } from './evaluate-request.js';
import type { ConsumedQueue } from './consumed-queue.js';

/** What one `evaluate` body came to: the reply, and what the metrics and the log need. */
export interface EvaluateRun {
  readonly reply: Reply;
  /** Absent when the body was refused before any evaluation (parsing, limits). */
  readonly stats?: EvaluateStats;
  readonly cause?: string;
  readonly failure?: unknown;
  readonly deadlinePassed?: true;
}

/**
 * Parses and evaluates one body of the evaluate queue; never throws. In a
 * thread of the evaluation pool (src/evaluate-threads/), or on the event
 * loop itself with `evaluate.threads` 0 (`evaluateInProcess`).
 */
export type EvaluateRunner = (
  body: Uint8Array,
  context: { readonly deadline: number | undefined },
) => Promise<EvaluateRun>;

/** The limits of `parseEvaluateRequest`, from the worker's settings. */
export function evaluateLimits(evaluate: Config['evaluate'], maxJsonDepth: number): EvaluateLimits {
  return {
    maxRequestBytes: evaluate.maxRequestBytes,
    maxJsonDepth,
    maxEventBytes: evaluate.maxEventBytes,
    maxRecipients: evaluate.maxRecipients,
    maxBatchEvents: evaluate.maxBatchEvents,
    maxBatchRecipients: evaluate.maxBatchRecipients,
  };
}

/** Parsing and `service` on the calling thread. */
export function evaluateInProcess(service: EvaluateService, limits: EvaluateLimits): EvaluateRunner {
  return async (body, context) => {
    try {
      const parsed = parseEvaluateRequest(body, limits);
      if (!parsed.ok) return { reply: failure(parsed.error) };
      const command = parsed.value;
      return command.op === 'evaluate'
        ? await service.handle(command, { deadline: context.deadline })
        : await service.handleBatch(command, { deadline: context.deadline });
    } catch (error) {
      // Parsing and the service answer every refusal; this is a bug, and the caller still gets an answer.
      return failureOutcome(error);
    }
  };
}

/** Narrow hook for the metrics of each evaluation; tests pass object literals. */
export interface EvaluateObserver {
  evaluated(stats: EvaluateStats): void;
}

export interface EvaluateQueueOptions {
  readonly amqp: Config['amqp'];
  readonly evaluate: Config['evaluate'];
  /** Where bodies are parsed and evaluated: the pool's threads, or `evaluateInProcess`. */
  readonly run: EvaluateRunner;
  readonly observer?: EvaluateObserver;
}

/**
 * The `evaluate` op's queue, for `RpcWorker`: declared like the request
 * queue (unanswerable requests dead-lettered to the same exchange; a
 * delivery limit when it is a quorum queue), consumed with its own prefetch.
 */
export function evaluateQueue(options: EvaluateQueueOptions): ConsumedQueue {
  const { amqp, evaluate, run, observer } = options;
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
        // The rules kept for evaluation are as new as the change events this worker has applied: a rule change
        // whose reply came before this request was sent may still wait on the event queue behind others (the
        // broker keeps no order between two queues). When that cannot be waited for, the subscription ended, and
        // its end emptied the caches: everything is read from the store.
        await context.changesApplied?.().catch(() => undefined);
        const outcome = await run(body, { deadline: context.deadline });
        if (outcome.stats !== undefined) observer?.evaluated(outcome.stats);
        return {
          reply: outcome.reply,
          conflicts: 0,
          op: 'evaluate',
          ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
          ...(outcome.failure === undefined ? {} : { failure: outcome.failure }),
          ...(outcome.deadlinePassed === true ? { deadlinePassed: true as const } : {}),
        };
      } catch (error) {
        // Runners answer every failure; this is a bug, and the caller still gets an answer.
        return { ...failureOutcome(error), conflicts: 0, op: 'evaluate' };
      }
    },
  };
}
