import type { NotifyRequestBody } from '../contract/ops.js';
import { DEFAULT_QUEUES } from '../contract/queue-names.js';
import type { Reply } from '../contract/reply.js';
import type { Logger } from '../logging/logger.js';
import type { BrokerUrls } from '../config/broker-urls.js';
import type { BrokerConnectionObserver } from '../amqp/broker-connection.js';
import type { EvaluateCoalescing } from './evaluate-coalescer.js';
import type { ReadFallback, RequestOptions } from './rpc-client-options.js';

// What `PushRulesClient` is given and resolves with, apart from the class
// itself; push-rules-client.ts, the package entry, exports all of it.

/** The part of `RpcClient` this client needs; tests fake it with an object literal. */
export interface RpcTransport {
  request(body: object, options: RequestOptions): Promise<Reply>;
  /** A message that wants no reply, settled by the broker's confirm (`notify`). */
  publish(body: object, options: RequestOptions): Promise<void>;
  close(): Promise<void>;
}

export interface PushRulesClientOptions {
  /**
   * The broker, e.g. `amqp://user:password@rabbitmq:5672`; for a cluster,
   * every node (an array, or the URLs comma-separated). The client keeps
   * one connection, to one node at a time, and moves to the next on loss.
   */
  readonly url: BrokerUrls;
  /** The workers' request queue; `matrix.push.rpc` unless they are configured otherwise. */
  readonly queue?: string;
  /** Default per-call deadline in ms (10 000); also sent as each request's `expiration`. */
  readonly timeoutMs?: number;
  /**
   * The workers' read queue (`matrix.push.read` unless configured otherwise;
   * `null`: send reads to `queue` too). Reads go there while a worker
   * consumes it, and to `queue` otherwise: never lost, at worst slower.
   */
  readonly readQueue?: string | null;
  /** Called for each read sent to `queue` instead of the read queue (for a metric). */
  readonly onReadFallback?: (reason: ReadFallback) => void;
  /** The workers' evaluate queue; `matrix.push.evaluate` unless they are configured otherwise. */
  readonly evaluateQueue?: string;
  /** The workers' delivery queue; `matrix.push.deliver` unless they are configured otherwise. */
  readonly deliverQueue?: string;
  /**
   * How `evaluate()` calls made while another is out are sent together, as
   * one message of the batch form (`{windowMs: 0.5, maxEvents: 64,
   * maxBytes: 1 MiB}` unless given); `false`: each call alone, as before.
   * The workers must know the batch form (this version or later).
   */
  readonly evaluateCoalescing?: EvaluateCoalescing | false;
  /** The broker user of `url`; needed when the workers have trusted publishers. */
  readonly publisherUserId?: string;
  /** Hears which node the client is connected to, and each loss (for metrics). */
  readonly observer?: BrokerConnectionObserver;
  /** Where the connection logs which node it is on, losses and failed attempts; silent when unset. */
  readonly logger?: Logger;
}

export interface CallOptions {
  readonly timeoutMs?: number;
}

export interface WriteOptions extends CallOptions {
  /**
   * The write's idempotency key; a fresh UUID when omitted. To retry a write
   * whose outcome is unknown (a `PushRulesError` with a `reason`), send it
   * again with the same `messageId`: it is applied at most once.
   */
  readonly messageId?: string;
}

export interface SetPushRuleOptions extends WriteOptions {
  /** Place the rule just before this one (same kind). */
  readonly before?: string;
  /** Place the rule just after this one (same kind). */
  readonly after?: string;
}

export interface SetPusherOptions extends WriteOptions {
  /**
   * The device of the access token the request came with (what whoami
   * answers), recorded with a new pusher so that the device's logout can
   * remove it. Never take it from the client's body.
   */
  readonly deviceId?: string;
}

/**
 * Whose pushers `deletePushers` removes, by the device that created them:
 * those of `deviceIds` (logout, device deletion); all but those of
 * `exceptDeviceId` (password change logging out the other devices; pushers
 * of an unknown device go too); or `all` (log out everywhere, deactivation).
 */
export type DeletePushersSelector =
  { readonly deviceIds: readonly string[] } | { readonly exceptDeviceId: string } | { readonly all: true };

export interface DeletePushersOptions extends WriteOptions {
  /** E-mail pushers belong to the account and are kept unless this is true (deactivation). */
  readonly includeEmail?: boolean;
}

export const DEFAULT_QUEUE = DEFAULT_QUEUES.request;
export const DEFAULT_READ_QUEUE = DEFAULT_QUEUES.read;
export const DEFAULT_EVALUATE_QUEUE = DEFAULT_QUEUES.evaluate;
export const DEFAULT_DELIVER_QUEUE = DEFAULT_QUEUES.deliver;

/** A `notify` message's notification: the event's fields the push gateway API sends on (docs/delivery.md). */
export type NotifyNotification = NotifyRequestBody['notification'];
/**
 * One recipient of a `notify`: who, `evaluate`'s actions for them, and their
 * counts. The actions may be `evaluate`'s own (read-only) array as it came.
 */
export type NotifyRecipient = Omit<NotifyRequestBody['recipients'][number], 'actions'> & {
  readonly actions?: readonly unknown[];
};

/** The reply to a `notify` that asked for one: recipients with an HTTP pusher, and devices scheduled. */
export interface NotifyReplyBody {
  readonly recipients: number;
  readonly devices: number;
  /**
   * Parts not taken in within `delivery.replyWaitMs` (a partition behind, or
   * a part refused): their recipients and devices are not counted above.
   * Absent when every part was.
   */
  readonly pending?: number;
}

export interface NotifyOptions extends CallOptions {
  /** Idempotency key: a message published again with the same one schedules nothing twice. A fresh one unless given. */
  readonly messageId?: string;
  /** Wait for the worker's reply (deliveries durably scheduled) rather than the broker's confirm only. */
  readonly reply?: boolean;
}

export interface EvaluateOptions extends CallOptions {
  /** Also name every recipient's matched rule (`rule_ids`). */
  readonly explain?: boolean;
}
