import type { Channel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES, REQUEST_MESSAGES } from '../errors/error-catalogue.js';
import { failureOutcome } from '../service/failure-reply.js';
import type { PushService } from '../service/push-service.js';
import { failure } from '../contract/reply.js';
import { declareReadQueue, declareTopology } from './amqp-topology.js';
import type { Command } from '../service/command.js';
import type { ConsumedQueue, ServeContext, ServeOutcome } from './consumed-queue.js';
import { parseRequest } from './parse-request.js';
import type { RequestLimits } from './request-limits.js';
import { isHomeserverOp, isReadOp } from '../contract/ops.js';

export interface UserOpsQueueOptions {
  readonly amqp: Config['amqp'];
  readonly limits: RequestLimits;
  readonly service: PushService;
  /** Run around serving a parsed request (the fault tests' crash hooks). */
  readonly beforeServe?: ((command: Command) => void) | undefined;
  readonly afterServe?: ((command: Command) => void) | undefined;
}

/**
 * The request queue: every push-rule and pusher op. The one queue a
 * session cannot serve without; its declaration brings the exchanges the
 * other queues use.
 */
export function requestQueue(options: UserOpsQueueOptions): ConsumedQueue {
  const { amqp } = options;
  return {
    role: 'request',
    queue: amqp.queue,
    prefetch: amqp.prefetch,
    required: true,
    declare: async (channel: Channel) => declareTopology(channel, amqp),
    serve: async (body, context) => serveUserOp(options, body, context, false),
  };
}

/** The read queue: the ops that change nothing, alone (a write sent here is refused). */
export function readQueue(options: UserOpsQueueOptions): ConsumedQueue {
  const { amqp } = options;
  return {
    role: 'read',
    queue: amqp.readQueue,
    prefetch: amqp.readPrefetch,
    required: false,
    declare: async (channel: Channel) => declareReadQueue(channel, amqp),
    serve: async (body, context) => serveUserOp(options, body, context, true),
  };
}

/** Every failure becomes a reply: parsing and the hooks run inside the same `try` as the service. */
async function serveUserOp(
  options: UserOpsQueueOptions,
  body: Buffer,
  context: ServeContext,
  readOnly: boolean,
): Promise<ServeOutcome> {
  let command: Command | undefined;
  try {
    const parsed = parseRequest(body, options.limits);
    if (!parsed.ok) return { reply: failure(parsed.error), conflicts: 0 };
    command = parsed.value;
    if (readOnly && !isReadOp(command.op)) {
      return {
        reply: failure(matrixError('Unrecognized', REQUEST_MESSAGES.writeOnReadQueue(command.op))),
        conflicts: 0,
        op: command.op,
      };
    }
    // With trusted publishers, only they got here; without any, nobody may send these.
    if (isHomeserverOp(command.op) && options.amqp.trustedPublishers.length === 0) {
      return {
        reply: failure(matrixError('Forbidden', MESSAGES.homeserverOpWithoutTrustedPublishers)),
        conflicts: 0,
        op: command.op,
      };
    }
    options.beforeServe?.(command);
    const outcome = await options.service.handle(command, context);
    options.afterServe?.(command);
    return { ...outcome, op: command.op };
  } catch (error) {
    // Parsing and the service turn every refusal into a result; this is a
    // bug, logged with its cause, and the caller still gets an answer.
    return { ...failureOutcome(error), conflicts: 0, ...(command === undefined ? {} : { op: command.op }) };
  }
}
