import { randomUUID } from 'node:crypto';
import type { ConsumeMessage, Message, Options } from 'amqplib';
import { BrokerConnection } from '../amqp/broker-connection.js';
import { closeReason, type BrokerLink } from '../amqp/broker-link.js';
import type { Reply } from '../contract/reply.js';
import { WIRE_VERSION_HEADERS } from '../contract/wire-version.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEARTBEAT_SECONDS,
  DEFAULT_RECONNECT,
  DEFAULT_TIMEOUT_MS,
  type RequestOptions,
  type RpcClientOptions,
} from './rpc-client-options.js';
import { RpcTransportError } from './rpc-errors.js';
import { failAll, parseReply, serialize, settle, watchReadQueue, type Pending, type Session } from './rpc-session.js';

const REPLY_QUEUE = 'amq.rabbitmq.reply-to';
/** The error amqplib (2.x) gives a confirm callback for a nack; any other means the channel closed. */
const NACKED = 'message nacked';

/** What a confirmed `publish` settles its pending entry with; never seen by a caller. */
const CONFIRMED: Reply = { ok: true, body: {} };

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
    if (this.#options.readQueue !== undefined)
      await watchReadQueue(session, this.#options.readQueue, this.#options.readProbeIntervalMs ?? 1_000);
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
}
