import { MongoError, MongoNetworkError, MongoServerSelectionError } from 'mongodb';
import { StoreUnavailableError } from './push-store.js';

/** Server error codes that mean "not now", not "never" (shutdown, failover). */
const TRANSIENT_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

export const DUPLICATE_KEY = 11000;

export function isDuplicateKey(error: unknown): boolean {
  return error instanceof MongoError && error.code === DUPLICATE_KEY;
}

/**
 * Turns driver errors that a later attempt may not meet (no reachable
 * server, a dropped connection, a primary stepping down) into
 * `StoreUnavailableError`; everything else is returned unchanged.
 */
export function classifyMongoError(error: unknown): unknown {
  if (error instanceof StoreUnavailableError) return error;
  const transient =
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    (error instanceof MongoError &&
      (error.hasErrorLabel('RetryableWriteError') ||
        error.hasErrorLabel('TransientTransactionError') ||
        (typeof error.code === 'number' && TRANSIENT_CODES.has(error.code)) ||
        error.name === 'MongoNotConnectedError' ||
        error.name === 'MongoTopologyClosedError' ||
        error.name === 'MongoPoolClearedError'));
  if (!transient) return error;
  return new StoreUnavailableError(`MongoDB is unavailable: ${(error as Error).message}`, { cause: error });
}
