import type { Channel, ConfirmChannel, ConsumeMessage, Options } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES, REQUEST_MESSAGES } from '../errors/error-catalogue.js';
import type { Logger } from '../logging/logger.js';
import { backoffDelay } from '../worker/backoff.js';
import type { ChangeEvent, HandleOutcome, PushService } from '../worker/push-service.js';
import { failureOutcome } from '../worker/failure-reply.js';
import { encodeReply, failure, type Reply } from '../worker/reply.js';
import { AckBatcher } from './ack-batcher.js';
import { declareDeadLetterQueue, declareReadQueue, declareTopology } from './amqp-topology.js';
import { BrokerConnection, closeReason, type BrokerLink } from './broker-connection.js';
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
  /** Connected to the node `broker` (`host:port`). */
  brokerConnected?(broker: string): void;
  /** The connection to `broker` was lost. */
  brokerLost?(broker: string): void;
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
  /**
   * A session cannot serve without it (the request queue). Any other queue
   * that cannot be opened is tried again while the worker serves the rest.
   */
  readonly required: boolean;
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
/** The longest wait between two attempts at a queue the worker can serve without (read, evaluate). */
const OPTIONAL_QUEUE_RETRY_MAX_MS = 10_000;
/** A queue still unavailable is warned about again every this many attempts (with the count). */
const OPTIONAL_QUEUE_WARN_EVERY = 30;
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

/** What the worker keeps on one broker connection; replaced as a whole when the connection is lost. */
interface Session {
  readonly link: BrokerLink;
  /** The consumed queues that are open, by role. */
  readonly lanes: Map<string, Lane>;
  /** Change events go out here, confirmed by the broker before their request is acknowledged. */
  readonly confirms: ConfirmChannel;
  /** The channel of the change-event subscription, when there is one. */
  events?: Channel;
  lost: boolean;
  readonly inFlight: Set<Promise<void>>;
  /** Optional queues waiting to be opened again, by role. */
  readonly retries: Map<string, NodeJS.Timeout>;
}

/**
 * Consumes the request queue, hands each request to the service, publishes
 * exactly one reply and then acknowledges.
 *
 * Lifecycle: `start()` connects (see `BrokerConnection`: every node of
 * `amqp.url` in turn, backoff only between whole rounds) and resolves once
 * consuming; `close()` stops consuming, lets every request in flight finish
 * and reply, and closes the connection. `close()` is idempotent.
 *
 * When the connection closes, or a channel the worker needs closes, or the
 * broker cancels the request queue's consumer, the session is dropped, its
 * requests in flight finish, and a new one is opened on the next node, the
 * topology declared again. Requests that were not acknowledged on the lost
 * channel are redelivered by the broker to whichever consumer is there.
 * The request queue is the one queue a session needs: the read and
 * evaluate queues (and the dead-letter queue) may be unavailable (homed
 * on a node that is down, say) without stopping the worker; they are
 * tried again while it serves.
 */
export class RpcWorker {
  readonly #service: PushService;
  readonly #options: RpcWorkerOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #observer: WorkerObserver;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #queues: readonly ConsumedQueue[];
  readonly #broker: BrokerConnection<Session>;
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
      required: role === 'request',
      declare,
      serve: async (body, context) => this.#serve(body, context, role === 'read'),
    });
    const requests = userOps('request', amqp.queue, amqp.prefetch, async (channel) => declareTopology(channel, amqp));
    const reads = userOps('read', amqp.readQueue, amqp.readPrefetch, async (channel) => declareReadQueue(channel, amqp));
    this.#queues = [requests, reads, ...(options.queues ?? [])];
    this.#broker = new BrokerConnection<Session>({
      urls: amqp.url,
      role: 'matrix-push-worker',
      // Heartbeats let both sides notice a peer that vanished without a FIN.
      heartbeatSeconds: amqp.heartbeatSeconds,
      attemptTimeoutMs: amqp.connectTimeoutMs,
      backoff: { baseMs: amqp.reconnectBaseMs, maxMs: amqp.reconnectMaxMs },
      setup: async (link) => this.#openSession(link),
      retire: async (session, reason) => this.#retire(session, reason),
      observer: {
        connected: (address, again) => {
          this.#observer.brokerConnected?.(address.label);
          if (again) this.#observer.reconnected();
        },
        lost: (address) => {
          this.#observer.brokerLost?.(address.label);
        },
      },
      logger: this.#log,
      ...(options.random === undefined ? {} : { random: options.random }),
    });
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Consuming the queues a worker needs, on a live connection: what `/readyz` asks. */
  get consuming(): boolean {
    const session = this.#broker.current;
    return (
      this.#closing === undefined &&
      session !== undefined &&
      !session.lost &&
      this.#queues.every((queue) => !queue.required || session.lanes.get(queue.role)?.consumerTag !== undefined)
    );
  }

  /** `host:port` of the node the worker is connected to, if it is. */
  get broker(): string | undefined {
    return this.#broker.address?.label;
  }

  /** The roles of the queues consumed now (`request`, `read`, `evaluate`). */
  get consumedQueues(): readonly string[] {
    const session = this.#broker.current;
    if (session === undefined || session.lost) return [];
    return [...session.lanes.values()].filter((lane) => lane.consumerTag !== undefined).map((lane) => lane.consumed.role);
  }

  async start(): Promise<void> {
    if (this.#options.amqp.trustedPublishers.length === 0) {
      this.#log.warn(
        'amqp.trustedPublishers is empty: any publisher that can reach the queue is trusted; the homeserver ops (delete_pushers, delete_user_data) are refused',
      );
    }
    await this.#broker.start();
  }

  /** Stops consuming, waits for in-flight requests to be answered, disconnects. */
  async close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    await this.#broker.close(async (session) => {
      clearRetries(session);
      await cancelConsumers(session, this.#log);
      await Promise.allSettled([...this.#inFlight]);
      await closeQuietly(session);
    });
    // Requests of a session lost just before may still be finishing.
    await Promise.allSettled([...this.#inFlight]);
    this.#log.info('worker closed');
  }

  /** Everything a session needs, on a new connection; a throw fails this attempt (the next node is tried). */
  async #openSession(link: BrokerLink): Promise<Session> {
    const { connection } = link;
    const confirms = await connection.createConfirmChannel();
    const session: Session = { link, lanes: new Map(), confirms, lost: false, inFlight: new Set(), retries: new Map() };
    let confirmsError: Error | undefined;
    confirms.on('error', (error: Error) => {
      confirmsError = error;
      this.#log.error({ err: error }, 'AMQP change-event publishing channel error');
    });
    confirms.on('close', () => {
      this.#lose(session, closeReason('change-event publishing channel closed', confirmsError));
    });
    try {
      // The request queue first: its topology holds the exchanges the others use.
      for (const consumed of this.#queues.filter((queue) => queue.required)) await this.#openLane(session, consumed);
      // Not needed to serve: the dead-letter queue only parks what nobody could answer.
      await declareDeadLetterQueue(connection, this.#options.amqp, this.#log);
      if (this.#options.changes !== undefined) session.events = await this.#subscribe(session, this.#options.changes);
      for (const consumed of this.#queues.filter((queue) => !queue.required)) await this.#openOptionalLane(session, consumed, 0);
      return session;
    } catch (error) {
      // The layer closes the connection; nothing of this session may be retried.
      session.lost = true;
      clearRetries(session);
      throw error;
    }
  }

  /** Opens `consumed` on a channel of its own and starts consuming. */
  async #openLane(session: Session, consumed: ConsumedQueue): Promise<void> {
    const channel = await session.link.connection.createChannel();
    let lane: Lane | undefined;
    let channelError: Error | undefined;
    channel.on('error', (error: Error) => {
      channelError = error;
      // While the queue is being opened, the failure is reported by whoever waits for it (once, not per channel).
      if (lane === undefined) this.#log.debug({ err: error, queue: consumed.queue }, 'AMQP channel error while opening a queue');
      else this.#log.error({ err: error, queue: consumed.queue }, 'AMQP channel error');
    });
    channel.on('close', () => {
      this.#laneEnded(session, consumed, lane, closeReason('channel closed', channelError));
    });
    try {
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
      const opened: Lane = { consumed, channel, acks };
      lane = opened;
      const { consumerTag } = await channel.consume(consumed.queue, (message) => {
        if (message === null) {
          this.#laneEnded(session, consumed, opened, 'consumer cancelled by the broker');
          return;
        }
        opened.acks.delivered(message.fields.deliveryTag);
        this.#track(session, this.#onMessage(session, opened, message));
      });
      opened.consumerTag = consumerTag;
      session.lanes.set(consumed.role, opened);
      this.#log.info({ queue: consumed.queue, prefetch: consumed.prefetch, broker: session.link.address.label }, 'consuming requests');
    } catch (error) {
      await channel.close().catch(() => undefined);
      throw error;
    }
  }

  /**
   * A queue the worker serves but does not need (read, evaluate): a failure
   * to open it is logged, and it is tried again with the reconnect backoff
   * while the session lives. A classic queue homed on a node that is down
   * fails this way until the node is back.
   */
  async #openOptionalLane(session: Session, consumed: ConsumedQueue, failures: number): Promise<void> {
    if (this.#over(session)) return;
    try {
      await this.#openLane(session, consumed);
      if (this.#over(session)) {
        // Lost or closing while it opened: nobody would cancel this consumer.
        await session.lanes.get(consumed.role)?.channel.close().catch(() => undefined);
        return;
      }
      if (failures > 0) this.#log.info({ queue: consumed.queue }, 'consuming again a queue that was unavailable');
    } catch (error) {
      // Lost or closed while the queue was being opened.
      if (this.#over(session)) return;
      this.#scheduleOptionalLane(session, consumed, failures + 1, error);
    }
  }

  /** The session is lost or the worker is closing: nothing more is opened on it. */
  #over(session: Session): boolean {
    return session.lost || this.#closing !== undefined;
  }

  #scheduleOptionalLane(session: Session, consumed: ConsumedQueue, failures: number, error: unknown): void {
    const { reconnectBaseMs } = this.#options.amqp;
    // Slower than reconnecting: what stops a queue (its node down, a
    // declaration that disagrees) takes seconds to minutes to clear, and
    // the worker serves meanwhile.
    const retryInMs = Math.max(reconnectBaseMs, backoffDelay({ baseMs: reconnectBaseMs, maxMs: OPTIONAL_QUEUE_RETRY_MAX_MS }, failures, this.#options.random));
    const fields = { err: error, queue: consumed.queue, role: consumed.role, failures, retryInMs, broker: session.link.address.label };
    // Said at once, then now and again: not a line per attempt for as long as it lasts.
    if (failures === 1 || failures % OPTIONAL_QUEUE_WARN_EVERY === 0) this.#log.warn(fields, 'cannot consume this queue; serving the others and trying it again');
    else this.#log.debug(fields, 'cannot consume this queue yet');
    clearTimeout(session.retries.get(consumed.role));
    const timer = setTimeout(() => {
      session.retries.delete(consumed.role);
      void this.#openOptionalLane(session, consumed, failures);
    }, retryInMs);
    timer.unref();
    session.retries.set(consumed.role, timer);
  }

  /** A lane's channel closed or its consumer was cancelled: the session goes if it needs the queue, else the queue is retried. */
  #laneEnded(session: Session, consumed: ConsumedQueue, lane: Lane | undefined, reason: string): void {
    // A cancelled consumer ends here twice (the cancel, then its channel's close): only the first counts.
    const registered = lane !== undefined && session.lanes.get(consumed.role) === lane;
    if (registered) session.lanes.delete(consumed.role);
    if (this.#over(session)) return;
    if (consumed.required) {
      this.#lose(session, `${consumed.role} queue: ${reason}`);
      return;
    }
    // Only a lane that was consuming is retried from here; one still being opened fails its own attempt.
    if (!registered) return;
    if (reason === 'consumer cancelled by the broker') void lane.channel.close().catch(() => undefined);
    this.#scheduleOptionalLane(session, consumed, 1, new Error(reason));
  }

  /**
   * Change events of every worker, on a queue of this connection's own
   * (exclusive: it goes with the connection). A subscription that ends may
   * have missed events, so it ends the whole session, and the listener is
   * reset both when it ends and when the next one starts.
   */
  async #subscribe(session: Session, listener: ChangeListener): Promise<Channel> {
    const channel = await session.link.connection.createChannel();
    let channelError: Error | undefined;
    channel.on('error', (error: Error) => {
      channelError = error;
      this.#log.error({ err: error }, 'AMQP change-event channel error');
    });
    channel.on('close', () => {
      listener.subscriptionReset();
      this.#lose(session, closeReason('change-event subscription closed', channelError));
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

  /** The session can no longer consume: the connection layer retires it and opens the next one. */
  #lose(session: Session, reason: string): void {
    if (session.lost) return;
    session.lost = true;
    clearRetries(session);
    session.link.lose(reason);
  }

  /**
   * A lost session: its requests in flight finish (on a dead connection they
   * fail fast; after a consumer cancel they can still reply), then its
   * channels close; the connection layer closes the connection after that.
   */
  async #retire(session: Session, reason: string): Promise<void> {
    session.lost = true;
    clearRetries(session);
    if (this.#closing === undefined) this.#log.warn({ reason, inFlight: session.inFlight.size }, 'lost the broker session');
    // When the connection itself still works (a consumer was cancelled, a
    // channel closed), its other queues must not take more requests that
    // closing it would cut off mid-way.
    await cancelConsumers(session);
    await Promise.allSettled([...session.inFlight]);
    await closeQuietly(session);
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
  async #onMessage(session: Session, lane: Lane, message: ConsumeMessage): Promise<void> {
    const progress: Progress = { replied: false, settled: false };
    try {
      await this.#answer(session, lane, message, progress);
    } catch (error) {
      try {
        this.#log.error({ err: error, ...progress }, 'request failed unexpectedly');
        const { replyTo, correlationId } = message.properties as { replyTo?: unknown; correlationId?: unknown };
        if (!progress.replied && typeof replyTo === 'string' && replyTo !== '' && typeof correlationId === 'string' && correlationId !== '') {
          const { reply } = failureOutcome(error);
          this.#publish(lane.channel, '', replyTo, reply, { correlationId, contentType: JSON_CONTENT });
        }
        if (!progress.settled) this.#settle(lane, message, 'ack');
      } catch {
        // Logging itself failed; the request is settled or goes back to the broker with the channel.
      }
    }
  }

  async #answer(session: Session, lane: Lane, message: ConsumeMessage, progress: Progress): Promise<void> {
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
    const changes = outcome.changes ?? [];
    for (const change of changes) {
      if (change.type === 'm.push_rules') this.#options.changes?.pushRulesChanged(change.user_id);
    }
    progress.replied = true;
    // The reply needs no confirm: it goes out on the channel the ack takes
    // after it, so a broker that has the ack has the reply.
    const replied = this.#publish(channel, '', replyTo, outcome.reply, { correlationId, contentType: JSON_CONTENT });
    // A change event wakes the users' /sync streams: the request is acked
    // only once the broker has confirmed every event (routed to every queue
    // bound, replicas included); otherwise it goes back to the queue, and
    // its redelivery announces the change again.
    const announced = replied && (await this.#announce(session, changes));
    progress.settled = true;
    this.#settle(lane, message, announced ? 'ack' : 'requeue');
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
      return { ...failureOutcome(error), conflicts: 0, ...(command === undefined ? {} : { op: command.op }) };
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

  /** Publishes the change events with publisher confirms; false when any was not confirmed. */
  async #announce(session: Session, changes: readonly ChangeEvent[]): Promise<boolean> {
    if (changes.length === 0) return true;
    const exchange = this.#options.amqp.eventsExchange;
    // A broker that blocks the connection (a memory or disk alarm) stops
    // reading it, so no confirm comes and no heartbeat fails: past this
    // wait the request goes back to the queue instead of holding a
    // shutdown or a lost session's retirement for as long as the alarm.
    const waitMs = this.#options.amqp.connectTimeoutMs;
    const confirmed = await Promise.all(
      changes.map(
        async (change) =>
          new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => {
              this.#log.warn({ user: change.user_id, type: change.type, waitMs }, 'no confirm of a change event in time; the request goes back to the queue');
              resolve(false);
            }, waitMs);
            const done = (ok: boolean) => {
              clearTimeout(timer);
              resolve(ok);
            };
            try {
              session.confirms.publish(exchange, change.type, Buffer.from(encodeReply(change)), { contentType: JSON_CONTENT, persistent: true }, (error) => {
                if (error !== null && error !== undefined) this.#log.warn({ err: error, user: change.user_id, type: change.type }, 'the broker did not confirm a change event');
                done(error === null || error === undefined);
              });
            } catch (error) {
              this.#log.error({ err: error, exchange, routingKey: change.type }, 'publish failed');
              done(false);
            }
          }),
      ),
    );
    return confirmed.every(Boolean);
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
  for (const lane of session.lanes.values()) {
    try {
      // Acks still waiting for their turn go out before the channel closes.
      lane.acks.flush();
    } catch {
      // The channel is already gone; the broker redelivers what was not acked.
    }
    await lane.channel.close().catch(() => undefined);
  }
  await session.events?.close().catch(() => undefined);
  await session.confirms.close().catch(() => undefined);
}

/** Cancels every consumer of the session that still has one; a channel already gone is skipped. */
async function cancelConsumers(session: Session, log?: Logger): Promise<void> {
  await Promise.all(
    [...session.lanes.values()].map(async ({ channel, consumerTag, consumed }) => {
      if (consumerTag === undefined) return;
      try {
        await channel.cancel(consumerTag);
      } catch (error) {
        log?.warn({ err: error, queue: consumed.queue }, 'could not cancel the consumer');
      }
    }),
  );
}

function clearRetries(session: Session): void {
  for (const timer of session.retries.values()) clearTimeout(timer);
  session.retries.clear();
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
