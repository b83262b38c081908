import type { Config } from '../config/config-schema.js';
import type { Logger } from '../logging/logger.js';
import type { ChangeEvent, PushService } from '../service/push-service.js';
import { BrokerConnection } from '../amqp/broker-connection.js';
import type { ChangeListener } from './change-listener.js';
import type { Command } from '../service/command.js';
import type { ConsumedQueue } from './consumed-queue.js';
import { ConsumerSession } from './consumer-session.js';
import { RequestEnvelope } from './request-envelope.js';
import type { RequestLimits } from './request-limits.js';
import { readQueue, requestQueue } from './user-ops-queues.js';
import { NO_OBSERVER, type WorkerObserver } from './worker-observer.js';

export interface RpcWorkerOptions {
  readonly amqp: Config['amqp'];
  /**
   * The push-rule and pusher queues served (`request`, `read`); both when
   * absent. A worker without the `rpc` role serves no request queue, one
   * without `read` no read queue (docs/operations.md#running-by-role).
   */
  readonly userOps?: readonly ('request' | 'read')[];
  /** More queues to consume on the same connection (the evaluate and `notify` queues). */
  readonly queues?: readonly ConsumedQueue[];
  /** Subscribes to the change events when set (the evaluate cache). */
  readonly changes?: ChangeListener;
  readonly limits: RequestLimits;
  readonly logger: Logger;
  readonly observer?: WorkerObserver;
  /** Run around serving a parsed request of the request and read queues (the fault tests' entry point sets crash hooks here). */
  readonly beforeServe?: (command: Command) => void;
  readonly afterServe?: (command: Command) => void;
  readonly now?: () => number;
  readonly random?: () => number;
}

/**
 * The worker's lifecycle over its queues: the request queue, the read
 * queue and any others given (evaluate), each a `ConsumedQueue`, consumed
 * on one broker connection (`ConsumerSession`), each request handled by
 * the same `RequestEnvelope`.
 *
 * `start()` connects (see `BrokerConnection`: every node of `amqp.url` in
 * turn, backoff only between whole rounds) and resolves once consuming;
 * `close()` stops consuming, lets every request in flight finish and
 * reply, and closes the connection. `close()` is idempotent.
 *
 * When the connection closes, or a channel the worker needs closes, or the
 * broker cancels the request queue's consumer, the session is dropped, its
 * requests in flight finish, and a new one is opened on the next node, the
 * topology declared again. Requests that were not acknowledged on the lost
 * channel are redelivered by the broker to whichever consumer is there.
 */
export class RpcWorker {
  readonly #options: RpcWorkerOptions;
  readonly #log: Logger;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #queues: readonly ConsumedQueue[];
  readonly #envelope: RequestEnvelope;
  readonly #broker: BrokerConnection<ConsumerSession>;
  #closing: Promise<void> | undefined;

  /** `service` serves the push-rule and pusher queues; a worker that serves neither (`userOps` empty) needs none. */
  constructor(service: PushService | undefined, options: RpcWorkerOptions) {
    this.#options = options;
    this.#log = options.logger;
    const { amqp } = options;
    const served = new Set(options.userOps ?? ['request', 'read']);
    if (service === undefined && served.size > 0) throw new TypeError('the request and read queues need a PushService');
    const userOps = {
      amqp,
      limits: options.limits,
      service: service as PushService,
      beforeServe: options.beforeServe,
      afterServe: options.afterServe,
    };
    this.#queues = [
      ...(served.has('request') ? [requestQueue(userOps)] : []),
      ...(served.has('read') ? [readQueue(userOps)] : []),
      ...(options.queues ?? []),
    ];
    const observer = options.observer ?? NO_OBSERVER;
    this.#envelope = new RequestEnvelope({
      amqp,
      logger: this.#log,
      observer,
      changes: options.changes,
      now: options.now ?? Date.now,
    });
    this.#broker = new BrokerConnection<ConsumerSession>({
      urls: amqp.url,
      role: 'matrix-push-worker',
      // Heartbeats let both sides notice a peer that vanished without a FIN.
      heartbeatSeconds: amqp.heartbeatSeconds,
      attemptTimeoutMs: amqp.connectTimeoutMs,
      backoff: { baseMs: amqp.reconnectBaseMs, maxMs: amqp.reconnectMaxMs },
      setup: async (link) =>
        ConsumerSession.open(link, {
          queues: this.#queues,
          amqp,
          changes: options.changes,
          logger: this.#log,
          handle: async (delivery) => this.#track(this.#envelope.handle(delivery)),
          closing: () => this.#closing !== undefined,
          random: options.random,
        }),
      retire: async (session, reason) => {
        if (this.#closing === undefined)
          this.#log.warn({ reason, inFlight: session.inFlight }, 'lost the broker session');
        await session.retire();
      },
      observer: {
        connected: (address, again) => {
          observer.brokerConnected?.(address.label);
          if (again) observer.reconnected();
        },
        lost: (address) => {
          observer.brokerLost?.(address.label);
        },
      },
      logger: this.#log,
      ...(options.random === undefined ? {} : { random: options.random }),
    });
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Consuming the queues a worker needs (`ConsumerSession.consumingNeeded`), on a live connection: what `/readyz` asks. */
  get consuming(): boolean {
    const session = this.#broker.current;
    return this.#closing === undefined && session !== undefined && session.consumingNeeded;
  }

  /** `host:port` of the node the worker is connected to, if it is. */
  get broker(): string | undefined {
    return this.#broker.address?.label;
  }

  /** The roles of the queues consumed now (`request`, `read`, `evaluate`, `deliver`). */
  get consumedQueues(): readonly string[] {
    return this.#broker.current?.consumedRoles ?? [];
  }

  /**
   * Publishes a change event made outside a request (delivery removing a
   * pusher a gateway rejected, a write applied after its `Unavailable`),
   * with a confirm; false when there is no session or the broker did not
   * confirm it.
   */
  async announce(change: ChangeEvent): Promise<boolean> {
    // This worker learns of it at once, with or without a broker session.
    if (change.type === 'm.pushers') this.#options.changes?.pushersChanged?.(change.user_id);
    else this.#options.changes?.pushRulesChanged?.(change.user_id);
    const session = this.#broker.current;
    if (session === undefined) return false;
    return this.#envelope.announce(session.confirms, [change]);
  }

  /**
   * Resolves once the change events on this worker's event queue now are
   * applied to its caches (`ChangeSubscription.changesApplied`); rejects
   * without a broker session or a subscription.
   */
  async changesApplied(): Promise<void> {
    const session = this.#broker.current;
    if (session === undefined) throw new Error('no broker session: change events cannot be waited for');
    return session.changesApplied();
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
      await session.cancelConsumers();
      await Promise.allSettled([...this.#inFlight]);
      await session.closeChannels();
    });
    // Requests of a session lost just before may still be finishing.
    await Promise.allSettled([...this.#inFlight]);
    this.#log.info('worker closed');
  }

  /** Every request of every session, for `inFlight` and for `close()` to wait on. */
  async #track(work: Promise<void>): Promise<void> {
    this.#inFlight.add(work);
    try {
      await work;
    } finally {
      this.#inFlight.delete(work);
    }
  }
}
