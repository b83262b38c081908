import type { Channel } from 'amqplib';
import type { HandleOutcome } from '../service/handle-outcome.js';

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
  /**
   * Messages without `replyTo` and `correlationId` are served too, and
   * answered only when they have them (`notify`: fire-and-forget unless
   * the publisher asks). Otherwise such a message is dead-lettered.
   */
  readonly replyOptional?: boolean;
  /**
   * A refused message (any error reply: bad input, an untrusted publisher)
   * is dead-lettered after its answer, for an operator to look at, rather
   * than acknowledged: a `notify` refused is a notification nobody gets.
   */
  readonly deadLetterRefusals?: boolean;
  /**
   * A message is served however old it is: its publisher's `expiration` and
   * `timestamp` say when the publisher stops waiting for an answer, not
   * when the message stops mattering (a `notify` the broker confirmed must
   * be delivered, whenever a worker gets to it).
   */
  readonly ignoresDeadline?: boolean;
  /** Declares the queue (every worker declares it the same way). */
  declare(channel: Channel): Promise<void>;
  /** Parses and serves one body; never throws (every failure is a reply). */
  serve(body: Buffer, context: ServeContext): Promise<ServeOutcome>;
}

/** What the worker tells a queue's `serve` about a request beyond its body. */
export interface ServeContext {
  readonly messageId: string | undefined;
  /** The publisher's AMQP `timestamp`, in ms (publish-time.ts); absent when it set none. */
  readonly publishedAt?: number | undefined;
  /** The publisher's AMQP `correlationId`, when it set one. */
  readonly correlationId?: string | undefined;
  /** The publisher waits for an answer (`replyTo` and `correlationId` set). */
  readonly answered?: boolean;
  /** When work on it stops (`stopWorkBy`): its reply is sent by then, and no store operation is started after. */
  readonly deadline: number | undefined;
  /** Resolves once every change event queued for this worker when it was called is applied; absent: no subscription. */
  readonly changesApplied?: () => Promise<void>;
}

/** `requeue`: not served, and not answered: the message goes back to the queue (the worker is stopping). */
export type ServeOutcome = HandleOutcome & { readonly op?: string; readonly requeue?: true };
