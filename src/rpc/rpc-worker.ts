import type { Channel, ChannelModel, ConsumeMessage, Options } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES, REQUEST_MESSAGES } from '../errors/error-catalogue.js';
import type { Logger } from '../logging/logger.js';
import { retryUntilDone } from '../worker/retry-until-done.js';
import { changeEventsOf, type HandleOutcome, type PushService } from '../worker/push-service.js';
import { encodeReply, failure, type Reply } from '../worker/reply.js';
import { AckBatcher } from './ack-batcher.js';
import { connectAmqp, connectionName } from './amqp-connect.js';
import { declareReadQueue, declareTopology } from './amqp-topology.js';
import { isReadOp, type Command } from './command.js';
import { parseRequest } from './parse-request.js';
import { requestDeadline, stopWorkBy } from './request-deadline.js';
import { HOMESERVER_OPS } from './request-schemas.js';
import type { RequestLimits } from './request-limits.js';

/** What the worker reports about each request it settles, for metrics. */
export interface RequestReport {
  /** The request's op, or `unknown` when the body did not name a valid one. */
  readonly op: string;
  /** Which queue it came from: `request`, `read` or `evaluate` (the role, not the configured name). */
  readonly queue: string;
  /** `ok`, an error kind, `expired` or `dead-lettered`. */
  readonly outcome: string;
  readonly seconds: number;
  readonly conflicts: number;
  readonly redelivered: boolean;
  readonly replayed: boolean;
  /** A write served without changing anything (see `HandleOutcome.unchanged`). */
  readonly unchanged: boolean;
  /** Answered Unavailable because its deadline came before the store had served it (see `HandleOutcome.deadlinePassed`). */
  readonly deadlinePassed: boolean;
}

/** Narrow hooks a metrics registry implements; tests pass object literals. */
export interface WorkerObserver {
  requestSettled(report: RequestReport): void;
  reconnected(): void;
}

/**
 * A queue the worker consumes besides the request queue (the evaluate
 * queue): its own channel and prefetch, the same envelope, trust, deadline,
 * reply, acknowledgement, logging and metrics as the request queue.
 */
export interface ConsumedQueue {
  /** What the queue is for, as metrics label it (`evaluate`). */
  readonly role: string;
  readonly queue: string;
  readonly prefetch: number;
  /** Declares the queue (every worker declares it the same way). */
  declare(channel: Channel): Promise<void>;
  /** Parses and serves one body; never throws (every failure is a reply). */
  serve(body: Buffer, context: ServeContext): Promise<ServeOutcome>;
}

/** What the worker tells a queue's `serve` about a request beyond its body. */
export interface ServeContext {
  readonly messageId: string | undefined;
  /** When work on it stops (`stopWorkBy`): its reply is sent by then, and no store operation is started after. */
  readonly deadline: number | undefined;
}

export type ServeOutcome = HandleOutcome & { readonly op?: string };

/**
 * Where the change events of every worker are delivered to this one: the
 * push rules of `userId` changed. `lost` when the subscription ended (so
 * events may have been missed), and again when a new one starts.
 */
export interface ChangeListener {
  pushRulesChanged(userId: string): void;
  subscriptionReset(): void;
}

export interface RpcWorkerOptions {
  readonly amqp: Config['amqp'];
  /** More queues to consume on the same connection (the evaluate queue). */
  readonly queues?: readonly ConsumedQueue[];
  /** Subscribes to the change events when set (the evaluate cache). */
  readonly changes?: ChangeListener;
  readonly limits: RequestLimits;
  readonly logger: Logger;
  readonly observer?: WorkerObserver;
  /** Run around serving a parsed request; main wires test-only fault injection here. */
  readonly beforeServe?: (command: Command) => void;
  readonly afterServe?: (command: Command) => void;
  readonly now?: () => number;
  readonly random?: () => number;
}

const JSON_CONTENT = 'application/json';
const NO_OBSERVER: WorkerObserver = { requestSettled: () => undefined, reconnected: () => undefined };

/** How far the handling of one request got, so that a failure neither answers nor settles it twice. */
interface Progress {
  replied: boolean;
  settled: boolean;
}

/** One consumed queue on its own channel, with its own prefetch and acknowledgements. */
interface Lane {
  readonly consumed: ConsumedQueue;
  readonly channel: Channel;
  readonly acks: AckBatcher;
  consumerTag?: string;
}

/** One connection and its channels; replaced as a whole when any of them is lost. */
interface Session {
  readonly connection: ChannelModel;
  readonly lanes: Lane[];
  /** The channel of the change-event subscription, when there is one. */
  events?: Channel;
  lost: boolean;
  readonly inFlight: Set<Promise<void>>;
}

/**
 * Consumes the request queue, hands each request to the service, publishes
 * exactly one reply and then acknowledges.
 *
 * Lifecycle: `start()` connects (retrying with capped, jittered backoff
 * until the broker answers) and resolves once consuming; `close()` stops
 * consuming, lets every request in flight finish and reply, and closes the
 * connection. `close()` is idempotent.
 *
 * amqplib does not reconnect by itself. When the connection or channel
 * closes, or the broker cancels the consumer (queue deleted, node going
 * down), the session is dropped and a new one is opened with the same
 * backoff; the topology is declared again on every new session. Requests
 * that were not acknowledged on the lost channel are redelivered by the
 * broker to whichever consumer is there.
 */
export class RpcWorker {
  readonly #service: PushService;
  readonly #options: RpcWorkerOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #observer: WorkerObserver;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stopWaiting = new AbortController();
  readonly #queues: readonly ConsumedQueue[];
  #session: Session | undefined;
  #connecting: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(service: PushService, options: RpcWorkerOptions) {
    this.#service = service;
    this.#options = options;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
    this.#observer = options.observer ?? NO_OBSERVER;
    const { amqp } = options;
    // The user ops: every one on the request queue, the reads alone on the read queue.
    const userOps = (role: 'request' | 'read', queue: string, prefetch: number, declare: (channel: Channel) => Promise<void>): ConsumedQueue => ({
      role,
      queue,
      prefetch,
      declare,
      serve: async (body, context) => this.#serve(body, context, role === 'read'),
    });
    const requests = userOps('request', amqp.queue, amqp.prefetch, async (channel) => declareTopology(channel, amqp));
    const reads = userOps('read', amqp.readQueue, amqp.readPrefetch, async (channel) => declareReadQueue(channel, amqp));
    this.#queues = [requests, reads, ...(options.queues ?? [])];
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Consuming on a live connection: what `/readyz` asks. */
  get consuming(): boolean {
    const session = this.#session;
    return (
      this.#closing === undefined &&
      session !== undefined &&
      !session.lost &&
      session.lanes.length === this.#queues.length &&
      session.lanes.every((lane) => lane.consumerTag !== undefined)
    );
  }

  async start(): Promise<void> {
    if (this.#options.amqp.trustedPublishers.length === 0) {
      this.#log.warn(
        'amqp.trustedPublishers is empty: any publisher that can reach the queue is trusted; the homeserver ops (delete_pushers, delete_user_data) are refused',
      );
    }
    await this.#connect();
  }

  /** Stops consuming, waits for in-flight requests to be answered, disconnects. */
  async close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    this.#stopWaiting.abort();
    await this.#connecting?.catch(() => undefined);
    const session = this.#session;
    if (session !== undefined && !session.lost) {
      await Promise.all(
        session.lanes.map(async ({ channel, consumerTag, consumed }) => {
          if (consumerTag === undefined) return;
          await channel.cancel(consumerTag).catch((error: unknown) => {
            this.#log.warn({ err: error, queue: consumed.queue }, 'could not cancel the consumer');
          });
        }),
      );
    }
    await Promise.allSettled([...this.#inFlight]);
    if (session !== undefined) await closeQuietly(session);
    this.#log.info('worker closed');
  }

  /** Opens sessions until one consumes, or the worker is closed. */
  async #connect(): Promise<void> {
    const { reconnectBaseMs, reconnectMaxMs } = this.#options.amqp;
    this.#connecting ??= retryUntilDone(async () => this.#openSession(), {
      policy: { baseMs: reconnectBaseMs, maxMs: reconnectMaxMs },
      signal: this.#stopWaiting.signal,
      ...(this.#options.random === undefined ? {} : { random: this.#options.random }),
      onFailure: (error, attempt, retryInMs) => {
        this.#log.warn({ err: error, attempt, retryInMs }, 'cannot reach RabbitMQ; retrying');
      },
    })
      .then((session) => {
        if (session !== undefined) this.#session = session;
      })
      .finally(() => {
        this.#connecting = undefined;
      });
    return this.#connecting;
  }

  async #openSession(): Promise<Session> {
    const settings = this.#options.amqp;
    // Heartbeats let both sides notice a peer that vanished without a FIN.
    const connection = await connectAmqp(settings.url, {
      heartbeatSeconds: settings.heartbeatSeconds,
      connectionName: connectionName('matrix-push-worker'),
    });
    let session: Session | undefined;
    connection.on('error', (error: Error) => {
      this.#log.error({ err: error }, 'AMQP connection error');
    });
    connection.on('close', () => {
      if (session !== undefined) this.#lose(session, 'connection closed');
    });
    try {
      session = { connection, lanes: [], lost: false, inFlight: new Set() };
      const current = session;
      // Declared first: the request queue's topology holds the exchanges the others use.
      for (const consumed of this.#queues) current.lanes.push(await this.#openLane(current, consumed));
      if (this.#options.changes !== undefined) current.events = await this.#subscribe(current, this.#options.changes);
      for (const lane of current.lanes) {
        const { queue, prefetch } = lane.consumed;
        const { consumerTag } = await lane.channel.consume(queue, (message) => {
          if (message === null) {
            this.#lose(current, 'consumer cancelled by the broker');
            return;
          }
          lane.acks.delivered(message.fields.deliveryTag);
          this.#track(current, this.#onMessage(lane, message));
        });
        lane.consumerTag = consumerTag;
        this.#log.info({ queue, prefetch }, 'consuming requests');
      }
      return current;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  async #openLane(session: Session, consumed: ConsumedQueue): Promise<Lane> {
    const channel = await session.connection.createChannel();
    channel.on('error', (error: Error) => {
      this.#log.error({ err: error, queue: consumed.queue }, 'AMQP channel error');
    });
    channel.on('close', () => {
      this.#lose(session, 'channel closed');
    });
    await consumed.declare(channel);
    await channel.prefetch(consumed.prefetch);
    const acks = new AckBatcher(channel, (flush) =>
      setImmediate(() => {
        try {
          flush();
        } catch (error) {
          // The channel is gone: the broker redelivers the requests elsewhere.
          this.#log.warn({ err: error }, 'could not acknowledge answered requests; the broker will redeliver them');
        }
      }),
    );
    return { consumed, channel, acks };
  }

  /**
   * Change events of every worker, on a queue of this connection's own
   * (exclusive: it goes with the connection). A subscription that ends may
   * have missed events, so it ends the whole session, and the listener is
   * reset both when it ends and when the next one starts.
   */
  async #subscribe(session: Session, listener: ChangeListener): Promise<Channel> {
    const channel = await session.connection.createChannel();
    channel.on('error', (error: Error) => {
      this.#log.error({ err: error }, 'AMQP change-event channel error');
    });
    channel.on('close', () => {
      listener.subscriptionReset();
      this.#lose(session, 'change-event subscription closed');
    });
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    await channel.bindQueue(queue, this.#options.amqp.eventsExchange, 'm.push_rules');
    listener.subscriptionReset();
    await channel.consume(
      queue,
      (message) => {
        if (message === null) {
          listener.subscriptionReset();
          this.#lose(session, 'change-event subscription cancelled by the broker');
          return;
        }
        const userId = changedUser(message.content);
        // An event we cannot read may be about anyone.
        if (userId === undefined) listener.subscriptionReset();
        else listener.pushRulesChanged(userId);
      },
      { noAck: true },
    );
    return channel;
  }

  /**
   * Drops a session that can no longer consume and opens a new one. The old
   * one is closed once its requests in flight have settled (on a dead
   * connection they fail fast; after a consumer cancel they can still reply).
   */
  #lose(session: Session, reason: string): void {
    if (session.lost) return;
    session.lost = true;
    if (this.#closing !== undefined) return;
    this.#log.warn({ reason, inFlight: session.inFlight.size }, 'lost the broker session; reconnecting');
    void Promise.allSettled([...session.inFlight]).then(async () => closeQuietly(session));
    void this.#connect().then(() => {
      if (this.#session !== session && this.#session?.lost === false) {
        this.#observer.reconnected();
        this.#log.info('reconnected to RabbitMQ');
      }
    });
  }

  #track(session: Session, work: Promise<void>): void {
    this.#inFlight.add(work);
    session.inFlight.add(work);
    void work.finally(() => {
      this.#inFlight.delete(work);
      session.inFlight.delete(work);
    });
  }

  /**
   * Never rejects: its promise is only tracked, so a rejection would be
   * unhandled and take the process down, and the broker would hand the same
   * request to the next worker. Anything unexpected is logged with its
   * cause; a request not answered yet gets an internal error and is acked.
   */
  async #onMessage(lane: Lane, message: ConsumeMessage): Promise<void> {
    const progress: Progress = { replied: false, settled: false };
    try {
      await this.#answer(lane, message, progress);
    } catch (error) {
      try {
        this.#log.error({ err: error, ...progress }, 'request failed unexpectedly');
        const { replyTo, correlationId } = message.properties as { replyTo?: unknown; correlationId?: unknown };
        if (!progress.replied && typeof replyTo === 'string' && replyTo !== '' && typeof correlationId === 'string' && correlationId !== '') {
          const reply = failure(matrixError('Database', MESSAGES.internalError));
          this.#publish(lane.channel, '', replyTo, reply, { correlationId, contentType: JSON_CONTENT });
        }
        if (!progress.settled) this.#settle(lane, message, 'ack');
      } catch {
        // Logging itself failed; the request is settled or goes back to the broker with the channel.
      }
    }
  }

  async #answer(lane: Lane, message: ConsumeMessage, progress: Progress): Promise<void> {
    const { channel } = lane;
    const started = performance.now();
    // amqplib types these properties as `any`; they are whatever the publisher sent.
    const properties = message.properties;
    const replyTo: unknown = properties.replyTo;
    const correlationId: unknown = properties.correlationId;
    const messageId: unknown = properties.messageId;
    const publisher: unknown = properties.userId;
    const redelivered = message.fields.redelivered;
    const report = (op: string, outcome: string, extra: Partial<RequestReport> = {}) => {
      this.#observer.requestSettled({
        op,
        queue: lane.consumed.role,
        outcome,
        seconds: (performance.now() - started) / 1000,
        conflicts: 0,
        redelivered,
        replayed: false,
        unchanged: false,
        deadlinePassed: false,
        ...extra,
      });
    };
    if (typeof replyTo !== 'string' || replyTo === '' || typeof correlationId !== 'string' || correlationId === '') {
      this.#log.warn(
        { messageId, hasReplyTo: typeof replyTo === 'string', hasCorrelationId: typeof correlationId === 'string' },
        'request without replyTo or correlationId cannot be answered: dead-lettered',
      );
      progress.settled = true;
      this.#settle(lane, message, 'reject');
      report('unknown', 'dead-lettered');
      return;
    }
    const deadline = requestDeadline(properties.timestamp as unknown, properties.expiration as unknown);
    if (deadline !== undefined && deadline <= this.#now()) {
      this.#log.info({ correlationId }, 'request expired before it was taken: dropped');
      progress.settled = true;
      this.#settle(lane, message, 'ack');
      report('unknown', 'expired');
      return;
    }

    const trusted = this.#options.amqp.trustedPublishers;
    const context: ServeContext = {
      messageId: typeof messageId === 'string' && messageId !== '' ? messageId : undefined,
      deadline: stopWorkBy(properties.timestamp as unknown, properties.expiration as unknown, this.#options.amqp.replyMarginMs),
    };
    const outcome: ServeOutcome =
      trusted.length > 0 && (typeof publisher !== 'string' || !trusted.includes(publisher))
        ? { reply: failure(matrixError('Forbidden', MESSAGES.untrustedPublisher)), conflicts: 0 }
        : await lane.consumed.serve(message.content, context);
    // This worker's own cache learns of its own writes at once, not a round trip later.
    for (const change of changeEventsOf(outcome)) {
      if (change.type === 'm.push_rules') this.#options.changes?.pushRulesChanged(change.user_id);
    }
    progress.replied = true;
    const published = this.#publish(channel, '', replyTo, outcome.reply, { correlationId, contentType: JSON_CONTENT });
    if (published) {
      for (const change of changeEventsOf(outcome)) {
        this.#publish(channel, this.#options.amqp.eventsExchange, change.type, change, { contentType: JSON_CONTENT });
      }
    }
    progress.settled = true;
    this.#settle(lane, message, published ? 'ack' : 'requeue');
    const seconds = (performance.now() - started) / 1000;
    this.#logOutcome(outcome, { correlationId, publisher, redelivered, ms: Math.round(seconds * 100_000) / 100 });
    report(outcome.op ?? 'unknown', outcome.reply.ok ? 'ok' : outcome.reply.error.kind, {
      conflicts: outcome.conflicts,
      replayed: outcome.replayed === true,
      unchanged: outcome.unchanged === true,
      deadlinePassed: outcome.deadlinePassed === true,
    });
  }

  /** Every failure becomes a reply: parsing and the hooks run inside the same `try` as the service. */
  async #serve(body: Buffer, context: ServeContext, readOnly: boolean): Promise<ServeOutcome> {
    let command: Command | undefined;
    try {
      const parsed = parseRequest(body, this.#options.limits);
      if (!parsed.ok) return { reply: failure(parsed.error), conflicts: 0 };
      command = parsed.value;
      if (readOnly && !isReadOp(command.op)) {
        return { reply: failure(matrixError('Unrecognized', REQUEST_MESSAGES.writeOnReadQueue(command.op))), conflicts: 0, op: command.op };
      }
      // With trusted publishers, only they got here; without any, nobody may send these.
      if (HOMESERVER_OPS.has(command.op) && this.#options.amqp.trustedPublishers.length === 0) {
        return { reply: failure(matrixError('Forbidden', MESSAGES.homeserverOpWithoutTrustedPublishers)), conflicts: 0, op: command.op };
      }
      this.#options.beforeServe?.(command);
      const outcome = await this.#service.handle(command, context);
      this.#options.afterServe?.(command);
      return { ...outcome, op: command.op };
    } catch (error) {
      // Parsing and the service turn every refusal into a result; this is a
      // bug, logged with its cause, and the caller still gets an answer.
      return {
        reply: failure(matrixError('Database', MESSAGES.internalError)),
        conflicts: 0,
        failure: error,
        ...(command === undefined ? {} : { op: command.op }),
      };
    }
  }

  #publish(channel: Channel, exchange: string, routingKey: string, body: Reply | object, options: Options.Publish): boolean {
    try {
      channel.publish(exchange, routingKey, Buffer.from(encodeReply(body)), options);
      return true;
    } catch (error) {
      this.#log.error({ err: error, exchange, routingKey: exchange === '' ? 'reply' : routingKey }, 'publish failed');
      return false;
    }
  }

  /** Acks go through the session's batcher (sent by the next event-loop turn); nacks at once. */
  #settle(lane: Lane, message: ConsumeMessage, how: 'ack' | 'reject' | 'requeue'): void {
    const tag = message.fields.deliveryTag;
    if (how === 'ack') {
      lane.acks.answered(tag);
      return;
    }
    lane.acks.settledElsewhere(tag);
    try {
      lane.channel.nack(message, false, how === 'requeue');
    } catch (error) {
      // The channel is gone: the broker redelivers the request elsewhere.
      this.#log.warn({ err: error }, 'could not settle a request; the broker will redeliver it');
    }
  }


  #logOutcome(outcome: ServeOutcome, context: Record<string, unknown>): void {
    const fields = {
      op: outcome.op,
      ...context,
      conflicts: outcome.conflicts,
      ...(outcome.replayed === true ? { replayed: true } : {}),
      ...(outcome.unchanged === true ? { unchanged: true } : {}),
      ...(outcome.deadlinePassed === true ? { deadlinePassed: true } : {}),
      ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
      outcome: outcome.reply.ok ? 'ok' : outcome.reply.error.kind,
    };
    if (outcome.failure !== undefined) this.#log.error({ ...fields, err: outcome.failure }, 'request failed unexpectedly');
    else if (!outcome.reply.ok && outcome.reply.error.status >= 500) this.#log.warn(fields, 'request not served');
    else if (!outcome.reply.ok) this.#log.info(fields, 'request refused');
    else this.#log.debug(fields, 'request served');
  }
}

async function closeQuietly(session: Session): Promise<void> {
  for (const lane of session.lanes) {
    try {
      // Acks still waiting for their turn go out before the channel closes.
      lane.acks.flush();
    } catch {
      // The channel is already gone; the broker redelivers what was not acked.
    }
    await lane.channel.close().catch(() => undefined);
  }
  await session.events?.close().catch(() => undefined);
  await session.connection.close().catch(() => undefined);
}

/** The `user_id` of a change event, when it is one. */
function changedUser(content: Buffer): string | undefined {
  try {
    const event: unknown = JSON.parse(content.toString('utf8'));
    const userId = typeof event === 'object' && event !== null ? (event as { user_id?: unknown }).user_id : undefined;
    return typeof userId === 'string' ? userId : undefined;
  } catch {
    return undefined;
  }
}
