import type { Channel } from 'amqplib';
import type { HandleOutcome } from '../service/push-service.js';

/**
 * One queue the worker consumes (requests, reads, evaluate): its own
 * channel and prefetch, and what to do with a body. The envelope around
 * the body (reply address, deadline, trust, reply, change events,
 * acknowledgement, logging, metrics) is the same for every queue
 * (`RequestEnvelope`).
 */
export interface ConsumedQueue {
  /** What the queue is for, as metrics and logs label it (`request`, `read`, `evaluate`). */
  readonly role: string;
  readonly queue: string;
  readonly prefetch: number;
  /**
   * A session cannot serve without it (the request queue). Any other queue
   * that cannot be opened is tried again while the worker serves the rest.
   */
  readonly required: boolean;
  /** Declares the queue (every worker declares it the same way). */
  declare(channel: Channel): Promise<void>;
  /** Parses and serves one body; never throws (every failure is a reply). */
  serve(body: Buffer, context: ServeContext): Promise<ServeOutcome>;
}

/** What the worker tells a queue's `serve` about a request beyond its body. */
export interface ServeContext {
  readonly messageId: string | undefined;
  /** When work on it stops (`stopWorkBy`): its reply is sent by then, and no store operation is started after. */
  readonly deadline: number | undefined;
}

export type ServeOutcome = HandleOutcome & { readonly op?: string };
