import type { EvaluateRunner } from './evaluate-queue.js';
import { isSmallEvaluate, type InlineBounds } from './small-evaluate.js';

/** Where an evaluation ran: on the event loop, or handed to an evaluation thread. */
export type EvaluatedOn = 'event_loop' | 'thread';

/** Narrow hook for the metrics; tests pass object literals. */
export interface EvaluatedOnObserver {
  evaluatedOn(where: EvaluatedOn): void;
}

export interface SplitEvaluateOptions {
  /** Parsing and evaluation on the event loop (`evaluateInProcess`). */
  readonly inline: EvaluateRunner;
  /** The evaluation threads (`EvaluatePool.run`); absent with `evaluate.threads` 0: everything inline. */
  readonly thread?: EvaluateRunner | undefined;
  readonly bounds: InlineBounds;
  readonly observer?: EvaluatedOnObserver | undefined;
}

/**
 * One runner for the evaluate queue: a small body (`isSmallEvaluate`) is
 * evaluated on the event loop, where it costs less than the hand-off to a
 * thread would, and every other body goes to a thread, so that a large room
 * never holds up the reads, writes and heartbeats of the event loop. The
 * decision is taken from the raw body, before any parse.
 */
export function splitEvaluateRunner(options: SplitEvaluateOptions): EvaluateRunner {
  const { inline, thread, bounds, observer } = options;
  return async (body, context) => {
    if (thread === undefined || isSmallEvaluate(body, bounds)) {
      observer?.evaluatedOn('event_loop');
      return inline(body, context);
    }
    observer?.evaluatedOn('thread');
    return thread(body, context);
  };
}
