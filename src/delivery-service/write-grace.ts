/** The driver's waits before a store write reaches the server, and the server's own bound on it (`mongodb.*`). */
export interface StoreWriteBounds {
  /** Finding a server to send it to (`serverSelectionTimeoutMS`). */
  readonly serverSelectionTimeoutMs: number;
  /** Waiting for a pooled connection (`waitQueueTimeoutMS`). */
  readonly waitQueueTimeoutMs: number;
  /** The server gives the write up after this (`maxTimeMS`). */
  readonly operationTimeoutMs: number;
}

/**
 * How long a worker that claimed an expired partition lease waits before
 * it reads the partition (and, as long again, before it reads it a second
 * time): the last holder may have started a journal write just before its
 * lease came into doubt (two thirds of the lease), and that write lands at
 * most one server selection, one wait for a connection and one server-side
 * time limit later — `maxTimeMS` alone bounds only the server's part. The
 * lease's last third has passed by the time the lease expires.
 *
 * A holder paused (SIGSTOP, a VM freeze) between its check and the socket
 * write is not bounded by this: docs/delivery.md says what that costs.
 */
export function writeGraceMs(store: StoreWriteBounds, leaseMs: number): number {
  const landsWithin = store.serverSelectionTimeoutMs + store.waitQueueTimeoutMs + store.operationTimeoutMs;
  return Math.max(0, Math.ceil(landsWithin - leaseMs / 3));
}
