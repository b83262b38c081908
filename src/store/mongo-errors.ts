import {
  MongoError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoOperationTimeoutError,
  MongoServerSelectionError,
} from 'mongodb';
import { StoreFailedError, StoreUnavailableError } from './push-store.js';

/** Server error codes that mean "not now", not "never" (shutdown, failover). */
const TRANSIENT_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/** MaxTimeMSExpired: the server gave up an operation at its `maxTimeMS`. */
const MAX_TIME_MS_EXPIRED = 50;

/**
 * The driver's timeouts, each of which a later attempt may not meet:
 * - a socket silent past `socketTimeoutMS`, or a connection not made within
 *   `connectTimeoutMS` (`MongoNetworkTimeoutError`, a `MongoNetworkError`);
 * - no pooled connection within `waitQueueTimeoutMS`
 *   (`MongoWaitQueueTimeoutError`, which the driver does not export);
 * - a client-side operation timeout (`MongoOperationTimeoutError`: only
 *   with `timeoutMS`, which driver 6.22 ignores);
 * - the server's own `maxTimeMS` (MaxTimeMSExpired).
 * (Server selection running out is `MongoServerSelectionError`.)
 */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof MongoNetworkTimeoutError ||
    error instanceof MongoOperationTimeoutError ||
    (error instanceof MongoError && (error.name === 'MongoWaitQueueTimeoutError' || error.code === MAX_TIME_MS_EXPIRED))
  );
}

export const DUPLICATE_KEY = 11000;

/**
 * Socket errors that can escape the driver unwrapped: a write racing the
 * server closing the connection surfaces as Node's EPIPE ("This socket has
 * been ended by the other party"), not as a MongoNetworkError.
 */
const SOCKET_ERROR_CODES = new Set([
  'EPIPE',
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ERR_STREAM_DESTROYED',
  'ERR_SOCKET_CLOSED',
  'ERR_STREAM_WRITE_AFTER_END',
]);

function isSocketError(error: unknown): boolean {
  for (
    let current: unknown = error, depth = 0;
    current instanceof Error && depth < 5;
    current = current.cause, depth += 1
  ) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && SOCKET_ERROR_CODES.has(code)) return true;
  }
  return false;
}

/** The server error codes on which the driver retries a read (`retryReads`); the transient ones and ReadConcernMajorityNotAvailableYet. */
const RETRYABLE_READ_CODES = new Set([...TRANSIENT_CODES, 134]);

/** A read that failed so that the driver would send it once more (`retryReads`). */
export function isRetryableRead(error: unknown): boolean {
  if (error instanceof MongoNetworkError) return true;
  if (!(error instanceof MongoError)) return false;
  if (typeof error.code === 'number' && RETRYABLE_READ_CODES.has(error.code)) return true;
  return /not master|node is recovering/i.test(error.message);
}

/** A duplicate key, as the driver throws it or as `classifyMongoError` wrapped it. */
export function isDuplicateKey(error: unknown): boolean {
  const driverError = error instanceof StoreFailedError ? error.cause : error;
  return driverError instanceof MongoError && driverError.code === DUPLICATE_KEY;
}

/**
 * Turns driver errors that a later attempt may not meet (no reachable
 * server, a dropped connection, a primary stepping down, a timeout) into
 * `StoreUnavailableError`, and every other error of the driver or the
 * server into `StoreFailedError`; anything else (a bug of ours) is
 * returned unchanged.
 */
export function classifyMongoError(error: unknown): unknown {
  if (error instanceof StoreUnavailableError || error instanceof StoreFailedError) return error;
  const transient =
    isSocketError(error) ||
    isTimeout(error) ||
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    (error instanceof MongoError &&
      (error.hasErrorLabel('RetryableWriteError') ||
        error.hasErrorLabel('TransientTransactionError') ||
        (typeof error.code === 'number' && TRANSIENT_CODES.has(error.code)) ||
        error.name === 'MongoNotConnectedError' ||
        error.name === 'MongoTopologyClosedError' ||
        error.name === 'MongoPoolClearedError'));
  if (transient)
    return new StoreUnavailableError(`MongoDB is unavailable: ${(error as Error).message}`, { cause: error });
  if (error instanceof MongoError) return new StoreFailedError(`MongoDB failed: ${error.message}`, { cause: error });
  return error;
}

/** Runs a store operation, its failure classified (`classifyMongoError`) as the service expects. */
export async function guard<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw classifyMongoError(error);
  }
}
