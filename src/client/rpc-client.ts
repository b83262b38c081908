import { randomUUID } from 'node:crypto';
import type { Channel, ConfirmChannel, ConsumeMessage, Message, Options } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import type { BrokerUrls } from '../config/broker-urls.js';
import {
  BrokerConnection,
  closeReason,
  type BrokerConnectionObserver,
  type BrokerLink,
} from '../amqp/broker-connection.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { Reply } from '../contract/reply.js';
import { WIRE_VERSION_HEADERS } from '../contract/wire-version.js';
import { EncodedBody } from './encoded-body.js';

const REPLY_QUEUE = 'amq.rabbitmq.reply-to';
/** The error amqplib (2.x) gives a confirm callback for a nack; any other means the channel closed. */
const NACKED = 'message nacked';

/**
 * - `timeout`: no reply within the deadline (the request may have been applied);
 * - `connection-lost`: the connection went before the reply (it may have been applied);
 * - `refused`: the broker did not take the request (a nack: say a quorum queue
 *   failing over to another node); it reached no worker;
 * - `unroutable`: no queue took it (no worker has declared it);
 * - `closed`: the client was closed; `bad-reply`: the reply is not an envelope.
 */
export type TransportFailure = 'timeout' | 'connection-lost' | 'refused' | 'unroutable' | 'closed' | 'bad-reply';

/** A request that got no reply; the worker may or may not have applied it. */
export class RpcTransportError extends Error {
  readonly reason: TransportFailure;

  constructor(reason: TransportFailure, message: string) {
    super(message);
    this.name = 'RpcTransportError';
    this.reason = reason;
  }
}

/**
 * A request body that cannot be sent as JSON (`JSON.stringify` refused it:
 * nested too deep for its stack, a cycle, a BigInt). Nothing was sent, and
 * only this call fails: it says nothing about the connection.
 */
export class RpcRequestError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RpcRequestError';
  }
}

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
const DEFAULT_HEARTBEAT_SECONDS = 10;
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_RECONNECT: BackoffPolicy = { baseMs: 100, maxMs: 1_000 };

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

/** What a confirmed `publish` settles its pending entry with; never seen by a caller. */
const CONFIRMED: Reply = { ok: true, body: {} };

interface Pending {
  readonly resolve: (reply: Reply) => void;
  readonly reject: (error: RpcTransportError) => void;
  readonly timer: NodeJS.Timeout;
  /** A read sent to the read queue: where to send it instead if that queue returns it. */
  fallback?: { readonly content: Buffer; readonly properties: Options.Publish };
}

interface Session {
  readonly link: BrokerLink;
  /** With publisher confirms: a request the broker did not take is known at once, not at its deadline. */
  readonly channel: ConfirmChannel;
  readonly pending: Map<string, Pending>;
  /** The read queue had a consumer when last counted. */
  readQueueServed: boolean;
  /** Its connection was lost: nothing more is sent on it. */
  retired: boolean;
  /** Counts the read queue's consumers; its own channel, since a missing queue closes the channel that asks. */
  probe?: Channel;
  probeTimer?: NodeJS.Timeout;
}

/**
 * The caller's side of the RPC contract: direct reply-to, TCP_NODELAY, a
 * deadline per call that is also the request's `expiration`, and `mandatory`
 * publishes so that a request no queue takes fails at once.
 *
 * The connection is `BrokerConnection`'s: opened by the first call, then
 * kept (on loss, the next node at once). When it goes, every pending call
 * fails at once with `connection-lost` (the reply-to pseudo-queue belongs
 * to the connection, so their replies could never arrive), and new calls
 * wait for the round of attempts under way, within their own deadline;
 * between two failed rounds over every node they fail at once with
 * `connection-lost`. A nacked request fails with `refused` and takes the
 * connection with it (see `#refused`): the calls pending on it fail with
 * `connection-lost`.
 */
export class RpcClient {
  readonly #options: RpcClientOptions;
  readonly #broker: BrokerConnection<Session>;
  #closed = false;

  constructor(options: RpcClientOptions) {
    this.#options = options;
    this.#broker = new BrokerConnection<Session>({
      urls: options.url,
      role: 'matrix-push-worker client',
      heartbeatSeconds: options.heartbeatSeconds ?? DEFAULT_HEARTBEAT_SECONDS,
      attemptTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      backoff: options.reconnect ?? DEFAULT_RECONNECT,
      setup: async (link) => this.#open(link),
      retire: (session) => {
        session.retired = true;
        clearInterval(session.probeTimer);
        failAll(session, 'connection-lost', 'the broker connection was lost before the reply');
      },
      ...(options.observer === undefined ? {} : { observer: options.observer }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    });
  }

  /** `host:port` of the node the client is connected to, if it is. */
  get broker(): string | undefined {
    return this.#broker.address?.label;
  }

  /**
   * Resolves with the reply envelope; rejects with `RpcTransportError` when
   * there is none, or `RpcRequestError` when `body` cannot be serialized.
   * An `EncodedBody` is sent as its text.
   */
  async request(body: object, options: RequestOptions = {}): Promise<Reply> {
    const { content, timeoutMs, session, leftMs } = await this.#ready(body, options);
    const correlationId = randomUUID();
    return new Promise<Reply>((resolve, reject) => {
      if (session.retired) {
        // Lost between handing it out and now: its calls can get no reply.
        reject(new RpcTransportError('connection-lost', 'the broker connection was lost before the request was sent'));
        return;
      }
      const timer = setTimeout(() => {
        session.pending.delete(correlationId);
        reject(new RpcTransportError('timeout', `no reply within ${timeoutMs} ms`));
      }, leftMs);
      const pending: Pending = { resolve, reject, timer };
      session.pending.set(correlationId, pending);
      const properties: Options.Publish = {
        mandatory: true,
        replyTo: REPLY_QUEUE,
        correlationId,
        contentType: 'application/json',
        headers: WIRE_VERSION_HEADERS,
        ...(options.noExpiration === true ? { persistent: true } : { expiration: String(leftMs) }),
        timestamp: Date.now(),
        ...(options.messageId === undefined ? {} : { messageId: options.messageId }),
        ...(this.#options.publisherUserId === undefined ? {} : { userId: this.#options.publisherUserId }),
      };
      let queue = options.queue ?? this.#options.queue;
      const { readQueue } = this.#options;
      if (options.read === true && options.queue === undefined && readQueue !== undefined) {
        if (session.readQueueServed) {
          queue = readQueue;
          pending.fallback = { content, properties };
        } else {
          this.#options.onReadFallback?.('no-consumer');
        }
      }
      try {
        session.channel.publish('', queue, content, properties, this.#onConfirm(session, correlationId));
      } catch {
        // The channel is closed but its close event has not run yet: drop
        // the connection now (every pending call of it fails), so the next
        // call connects instead of failing too.
        session.link.lose('publishing failed: the channel is closed');
        settle(session, correlationId, (p) => {
          p.reject(new RpcTransportError('connection-lost', 'the broker connection is closed'));
        });
      }
    });
  }

  /**
   * Publishes a message that wants no reply (`notify` without one):
   * persistent, mandatory, and resolved once the broker confirmed it, i.e.
   * once it is durably in the queue. Rejects with `RpcTransportError`:
   * `refused` (nacked), `unroutable` (no queue), `connection-lost`,
   * `timeout` (no confirm in time) or `closed`; `RpcRequestError` when
   * `body` cannot be serialized.
   */
  async publish(body: object, options: RequestOptions = {}): Promise<void> {
    const { content, timeoutMs, session, leftMs } = await this.#ready(body, options);
    // Not a reply's key: how a return or the confirm finds this call.
    const correlationId = randomUUID();
    await new Promise<void>((resolve, reject) => {
      if (session.retired) {
        reject(new RpcTransportError('connection-lost', 'the broker connection was lost before the message was sent'));
        return;
      }
      const timer = setTimeout(() => {
        session.pending.delete(correlationId);
        reject(new RpcTransportError('timeout', `no confirm from the broker within ${timeoutMs} ms`));
      }, leftMs);
      session.pending.set(correlationId, {
        resolve: () => {
          resolve();
        },
        reject,
        timer,
      });
      const properties: Options.Publish = {
        mandatory: true,
        persistent: true,
        correlationId,
        contentType: 'application/json',
        headers: WIRE_VERSION_HEADERS,
        timestamp: options.timestamp ?? Date.now(),
        ...(options.messageId === undefined ? {} : { messageId: options.messageId }),
        ...(this.#options.publisherUserId === undefined ? {} : { userId: this.#options.publisherUserId }),
      };
      try {
        session.channel.publish('', options.queue ?? this.#options.queue, content, properties, (error: unknown) => {
          if (error instanceof Error && error.message === NACKED) this.#refused(session, correlationId);
          // A return (unroutable) comes before the ack and has settled the call already.
          else if (error === null || error === undefined)
            settle(session, correlationId, (p) => {
              p.resolve(CONFIRMED);
            });
        });
      } catch {
        session.link.lose('publishing failed: the channel is closed');
        settle(session, correlationId, (p) => {
          p.reject(new RpcTransportError('connection-lost', 'the broker connection is closed'));
        });
      }
    });
  }

  /** What every call does before it publishes: the body serialized, a connection, the time left. */
  async #ready(
    body: object,
    options: RequestOptions,
  ): Promise<{ content: Buffer; timeoutMs: number; session: Session; leftMs: number }> {
    if (this.#closed) throw new RpcTransportError('closed', 'the client is closed');
    // Before the connection is touched: a throw from JSON.stringify inside
    // the publish's `try` was taken for a closed channel, and the connection
    // was dropped under every other caller's pending call.
    const content = serialize(body);
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // The deadline runs from the call, the wait for a connection included.
    const deadline = Date.now() + timeoutMs;
    const session = await this.#connectedWithin(timeoutMs);
    return { content, timeoutMs, session, leftMs: Math.max(1, deadline - Date.now()) };
  }

  /**
   * The broker nacked a request: it is in no queue. The call fails at once
   * (`refused`: nothing was delivered, send it again). The channel is
   * dropped with its connection: on RabbitMQ 3.10 a channel that first
   * published to a quorum queue while its leader was being re-elected keeps
   * having that queue's publishes refused until the old leader is back,
   * while a new channel is served as soon as the new leader is up.
   */
  #refused(session: Session, correlationId: string): void {
    settle(session, correlationId, (p) => {
      p.reject(
        new RpcTransportError(
          'refused',
          'the broker did not take the request (a queue failing over?); it reached no worker',
        ),
      );
    });
    session.link.lose('the broker refused a request');
  }

  /**
   * The confirm callback of a request. amqplib calls it with "message
   * nacked" for a nack, and with "channel closed" for every unconfirmed
   * message of a channel that closes (those calls fail as `connection-lost`
   * with the connection).
   */
  #onConfirm(session: Session, correlationId: string): (error: unknown) => void {
    return (error) => {
      if (error instanceof Error && error.message === NACKED) this.#refused(session, correlationId);
    };
  }

  /** Rejects pending calls with `closed` and disconnects. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#broker.close((session) => {
      failAll(session, 'closed', 'the client was closed');
      clearInterval(session.probeTimer);
    });
  }

  /** `#connected()`, or `timeout` once `ms` have passed. */
  async #connectedWithin(ms: number): Promise<Session> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.#connected(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            reject(new RpcTransportError('timeout', `no broker connection within ${ms} ms`));
          }, ms);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #connected(): Promise<Session> {
    try {
      return await this.#broker.session();
    } catch (error) {
      if (this.#closed) throw new RpcTransportError('closed', 'the client is closed');
      throw new RpcTransportError('connection-lost', (error as Error).message);
    }
  }

  async #open(link: BrokerLink): Promise<Session> {
    const { connection } = link;
    const channel = await connection.createConfirmChannel();
    const session: Session = { link, channel, pending: new Map(), readQueueServed: false, retired: false };
    let channelError: unknown;
    // Kept for the reason below: the broker's close code and text say why.
    channel.on('error', (error: unknown) => {
      channelError = error;
    });
    channel.on('close', () => {
      link.lose(closeReason('the channel closed', channelError));
    });
    channel.on('return', (message: Message) => {
      const correlationId = String(message.properties.correlationId);
      const fallback = session.pending.get(correlationId)?.fallback;
      if (fallback !== undefined && this.#resend(session, correlationId, fallback)) return;
      settle(session, correlationId, (p) => {
        p.reject(new RpcTransportError('unroutable', 'no queue took the request: is any worker running?'));
      });
    });
    await channel.consume(
      REPLY_QUEUE,
      (message: ConsumeMessage | null) => {
        if (message === null) return;
        const id = String(message.properties.correlationId);
        // A second reply for the same call (the request was redelivered and
        // answered again) finds nothing pending and is dropped here.
        settle(session, id, (p) => {
          const reply = parseReply(message.content);
          if (reply === undefined) p.reject(new RpcTransportError('bad-reply', 'the reply is not a JSON object'));
          else p.resolve(reply);
        });
      },
      { noAck: true },
    );
    if (this.#options.readQueue !== undefined) await this.#watchReadQueue(session, this.#options.readQueue);
    return session;
  }

  /** A read the read queue returned goes to the request queue, which serves every op. */
  #resend(session: Session, correlationId: string, fallback: NonNullable<Pending['fallback']>): boolean {
    const pending = session.pending.get(correlationId);
    if (pending === undefined) return true;
    delete pending.fallback;
    session.readQueueServed = false;
    this.#options.onReadFallback?.('returned');
    try {
      session.channel.publish(
        '',
        this.#options.queue,
        fallback.content,
        fallback.properties,
        this.#onConfirm(session, correlationId),
      );
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Counts the read queue's consumers now and every `readProbeIntervalMs`:
   * reads go there only while some worker consumes it, so a read is never
   * left waiting in a queue nobody reads (a queue that does not exist
   * returns the read at once, and it is sent to the request queue).
   */
  async #watchReadQueue(session: Session, readQueue: string): Promise<void> {
    const count = async () => {
      // A session whose attempt failed, or that was lost, is never retired by
      // the layer when it was never live: stop counting for it here.
      if (session.link.lost) {
        clearInterval(session.probeTimer);
        return;
      }
      try {
        if (session.probe === undefined) {
          const probe = await session.link.connection.createChannel();
          probe.on('error', () => undefined);
          probe.on('close', () => {
            if (session.probe === probe) delete session.probe;
          });
          session.probe = probe;
        }
        const { consumerCount } = await session.probe.checkQueue(readQueue);
        session.readQueueServed = consumerCount > 0;
      } catch {
        // Not declared (the probe channel is closed by the broker), or the connection is going.
        session.readQueueServed = false;
      }
    };
    await count();
    session.probeTimer = setInterval(() => void count(), this.#options.readProbeIntervalMs ?? 1_000);
    session.probeTimer.unref();
  }
}

function serialize(body: object): Buffer {
  if (body instanceof EncodedBody) return Buffer.from(body.json);
  try {
    return Buffer.from(JSON.stringify(body));
  } catch (error) {
    throw new RpcRequestError(`the request body cannot be serialized as JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

function settle(session: Session, correlationId: string, how: (pending: Pending) => void): void {
  const pending = session.pending.get(correlationId);
  if (pending === undefined) return;
  clearTimeout(pending.timer);
  session.pending.delete(correlationId);
  how(pending);
}

function failAll(session: Session, reason: TransportFailure, message: string): void {
  for (const id of [...session.pending.keys()]) {
    settle(session, id, (p) => {
      p.reject(new RpcTransportError(reason, message));
    });
  }
}

/** The envelope, trusted to be the contract's once it is a JSON object. */
function parseReply(content: Buffer): Reply | undefined {
  try {
    const value: unknown = JSON.parse(content.toString('utf8'));
    return typeof value === 'object' && value !== null && 'ok' in value ? (value as Reply) : undefined;
  } catch {
    return undefined;
  }
}
