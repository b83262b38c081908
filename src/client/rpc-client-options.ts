import type { BrokerConnectionObserver } from '../amqp/broker-connection.js';
import type { BrokerUrls } from '../config/broker-urls.js';
import type { Logger } from '../logging/logger.js';
import type { BackoffPolicy } from '../retry/backoff.js';

export interface RpcClientOptions {
  /**
   * The broker: one `amqp://` URL, or every node of a cluster (an array, or
   * one string with the URLs comma-separated). One connection, to one of
   * them at a time (shuffled per process); on loss the next is tried at once.
   */
  readonly url: BrokerUrls;
  /** The workers' request queue. */
  readonly queue: string;
  /** Per-call deadline unless a call gives its own; also sent as `expiration`. */
  readonly timeoutMs?: number;
  /**
   * The broker user of `url`, sent as each request's `userId` so that workers
   * with trusted publishers accept it (RabbitMQ refuses any other value).
   */
  readonly publisherUserId?: string;
  /** Heartbeat interval asked of the broker (0: off); default 10 s, the workers' default. */
  readonly heartbeatSeconds?: number;
  /** One attempt at one node, handshake included (default 5 000 ms). */
  readonly connectTimeoutMs?: number;
  /** The wait between two rounds over every node when none answered (default 100 ms to 1 000 ms). */
  readonly reconnect?: BackoffPolicy;
  /**
   * The workers' read queue: reads (`{read: true}`) go there while it has a
   * consumer, and to `queue` otherwise. Unset: every request goes to `queue`.
   */
  readonly readQueue?: string;
  /** How often the read queue's consumers are counted (default 1 000 ms). */
  readonly readProbeIntervalMs?: number;
  /** A read went to `queue` instead: the read queue returned it, or has no consumer (or does not exist). */
  readonly onReadFallback?: (reason: ReadFallback) => void;
  /** Connected, lost, closed: which node the client is on (the gateway's metrics). */
  readonly observer?: BrokerConnectionObserver;
  /** Where the connection's own events are logged (which node, losses, failed attempts); none by default. */
  readonly logger?: Logger;
}

export type ReadFallback = 'returned' | 'no-consumer';

/** A call's deadline when neither the call nor the client gives one. */
export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_HEARTBEAT_SECONDS = 10;
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_RECONNECT: BackoffPolicy = { baseMs: 100, maxMs: 1_000 };

export interface RequestOptions {
  readonly timeoutMs?: number;
  /** Idempotency key: a write retried with the same id is applied once. */
  readonly messageId?: string;
  /** Another queue than the client's own (the evaluate queue). */
  readonly queue?: string;
  /** A read-only op: the read queue may serve it (see `RpcClientOptions.readQueue`). */
  readonly read?: boolean;
  /**
   * Send no `expiration`: the message must be served even after the caller
   * stopped waiting (a `notify`: the broker would otherwise drop it unserved
   * once expired). The call's own deadline still applies to its reply.
   */
  readonly noExpiration?: boolean;
  /** The AMQP `timestamp` (ms) of a `publish`; now unless given (the router keeps a `notify`'s publish time). */
  readonly timestamp?: number;
}
