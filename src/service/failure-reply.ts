import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { StoreFailedError, StoreUnavailableError } from '../store/push-store.js';
import { DeadlinePassedError } from './bounded-store.js';
import { failure, type Reply } from '../contract/reply.js';

/** The reply a failure gets, and what the log needs to say why. */
export interface FailureOutcome {
  readonly reply: Reply;
  /** Why the store was unavailable (a transient failure: the caller may retry). */
  readonly cause?: string;
  /** The error itself, logged at `error` with its stack: a storage failure or a bug. */
  readonly failure?: unknown;
  /** The request's deadline came before the store had served it. */
  readonly deadlinePassed?: true;
}

/**
 * The one place that decides which reply a thrown failure gets, wherever
 * it was caught (a service, a queue, the envelope):
 *
 * | thrown | reply |
 * |---|---|
 * | `DeadlinePassedError` | Unavailable (503), the deadline's message |
 * | `StoreUnavailableError` | Unavailable (503): retry |
 * | `StoreFailedError` | Database (500) |
 * | anything else | Internal (500): a bug |
 *
 * Refusals decided by the domain never get here: they are results, not throws.
 */
export function failureOutcome(error: unknown): FailureOutcome {
  if (error instanceof DeadlinePassedError) {
    return {
      reply: failure(matrixError('Unavailable', MESSAGES.deadlinePassed)),
      cause: error.message,
      deadlinePassed: true,
    };
  }
  if (error instanceof StoreUnavailableError) {
    return { reply: failure(matrixError('Unavailable', MESSAGES.storeUnavailable)), cause: error.message };
  }
  if (error instanceof StoreFailedError) {
    return { reply: failure(matrixError('Database', MESSAGES.storageFailure)), failure: error };
  }
  return { reply: failure(matrixError('Internal', MESSAGES.internalError)), failure: error };
}
