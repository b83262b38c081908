import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import type { Logger } from '../logging/logger.js';
import { backoffDelay } from '../retry/backoff.js';
import { AckBatcher } from './ack-batcher.js';
import { declareDeadLetterQueue, declareExchanges } from './amqp-topology.js';
import { closeReason, type BrokerLink } from '../amqp/broker-link.js';
import type { ChangeListener } from './change-listener.js';
import { ChangeSubscription } from './change-subscription.js';
import type { ConsumedQueue } from './consumed-queue.js';
import type { Lane } from './lane.js';
import type { Delivery } from './request-envelope.js';

/** The longest wait between two attempts at a queue the worker can serve without (read, evaluate). */
const OPTIONAL_QUEUE_RETRY_MAX_MS = 10_000;
/** A queue still unavailable is warned about again every this many attempts (with the count). */
const OPTIONAL_QUEUE_WARN_EVERY = 30;

export interface ConsumerSessionOptions {
  readonly queues: readonly ConsumedQueue[];
  readonly amqp: Config['amqp'];
  /** Subscribes to the change events when set (the evaluate cache). */
  readonly changes?: ChangeListener | undefined;
  readonly logger: Logger;
  /** A request came off a lane; the promise never rejects (see `RequestEnvelope.handle`). */
  readonly handle: (delivery: Delivery) => Promise<void>;
  /** The worker is closing: nothing more is opened. */
  readonly closing: () => boolean;
  readonly random?: (() => number) | undefined;
}

/**
 * What the worker keeps on one broker connection, replaced as a whole when
 * the connection is lost: a channel per consumed queue (a lane), a confirm
 * channel for change events, the change-event subscription, and the
 * requests in flight on them.
 *
 * The request queue is the one queue a session needs: the read, evaluate
 * and `notify` queues (and the dead-letter queue) may be unavailable
 * (homed on a node that is down, say) without stopping the worker; they
 * are tried again, with a backoff, while the session lives. A worker
 * without the request queue (by its roles) has only such queues.
 */
export class ConsumerSession {
  readonly #link: BrokerLink;
  readonly #options: ConsumerSessionOptions;
  readonly #log: Logger;
  /** The consumed queues that are open, by role. */
  readonly #lanes = new Map<string, Lane>();
  /** Change events go out here, confirmed by the broker before their request is acknowledged. */
  readonly #confirms: ConfirmChannel;
  /** The change-event subscription, when there is one. */
  #events: ChangeSubscription | undefined;
  #lost = false;
  readonly #inFlight = new Set<Promise<void>>();
  /** Optional queues waiting to be opened again, by role. */
  readonly #retries = new Map<string, NodeJS.Timeout>();

  /** Where change events are published, with publisher confirms. */
  get confirms(): ConfirmChannel {
    return this.#confirms;
  }

  private constructor(link: BrokerLink, confirms: ConfirmChannel, options: ConsumerSessionOptions) {
    this.#link = link;
    this.#confirms = confirms;
    this.#options = options;
    this.#log = options.logger;
  }

  /** Everything a session needs, on a new connection; a throw fails this attempt (the next node is tried). */
  static async open(link: BrokerLink, options: ConsumerSessionOptions): Promise<ConsumerSession> {
    const confirms = await link.connection.createConfirmChannel();
    const session = new ConsumerSession(link, confirms, options);
    let confirmsError: Error | undefined;
    confirms.on('error', (error: Error) => {
      confirmsError = error;
      options.logger.error({ err: error }, 'AMQP change-event publishing channel error');
    });
    confirms.on('close', () => {
      session.lose(closeReason('change-event publishing channel closed', confirmsError));
    });
    try {
      const { queues } = options;
      // The change events first (bound, then the caches reset): a read
      // served before the bind could be answered from, and kept in, a cache
      // that no event can reach yet. The request queue serves reads too
      // (when the read queue has no consumer).
      if (options.changes !== undefined)
        session.#events = await ChangeSubscription.open(link.connection, {
          eventsExchange: options.amqp.eventsExchange,
          listener: options.changes,
          logger: options.logger,
          lost: (reason) => {
            session.lose(reason);
          },
        });
      // Then the request queue: its topology holds the dead-letter exchange. A worker without one (without
      // the `rpc` role) declares the exchanges itself: its queues dead-letter there, and it publishes change events.
      const required = queues.filter((queue) => queue.required);
      if (required.length === 0) await declareExchanges(link.connection, options.amqp);
      for (const consumed of required) await session.#openLane(consumed);
      // Not needed to serve: the dead-letter queue only parks what nobody could answer.
      await declareDeadLetterQueue(link.connection, options.amqp, options.logger);
      for (const consumed of queues.filter((queue) => !queue.required)) await session.#openOptionalLane(consumed, 0);
      return session;
    } catch (error) {
      // The layer closes the connection; nothing of this session may be retried.
      session.#lost = true;
      session.#clearRetries();
      throw error;
    }
  }

  get link(): BrokerLink {
    return this.#link;
  }

  /** See `ChangeSubscription.changesApplied`; rejects without a subscription. */
  async changesApplied(): Promise<void> {
    if (this.#events === undefined) throw new Error('no change-event subscription');
    return this.#events.changesApplied();
  }

  /** The session can no longer consume (lost, or retired). */
  get lost(): boolean {
    return this.#lost;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** The roles of the queues consumed now. */
  get consumedRoles(): readonly string[] {
    if (this.#lost) return [];
    return [...this.#lanes.values()].filter((lane) => lane.consumerTag !== undefined).map((lane) => lane.consumed.role);
  }

  /**
   * Consuming every queue the session needs: the required ones (the request
   * queue); with none required (a worker without the `rpc` role), every
   * queue it has, since they are all it is for.
   */
  get consumingNeeded(): boolean {
    const { queues } = this.#options;
    const needed = queues.some((queue) => queue.required) ? queues.filter((queue) => queue.required) : queues;
    return !this.#lost && needed.every((queue) => this.#lanes.get(queue.role)?.consumerTag !== undefined);
  }

  /** The session can no longer consume: the connection layer retires it and opens the next one. */
  lose(reason: string): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#clearRetries();
    this.#link.lose(reason);
  }

  /**
   * A lost session: its consumers are cancelled (when the connection
   * itself still works, after a consumer cancel or a closed channel, its
   * other queues must not take more requests that closing would cut off),
   * its requests in flight finish (on a dead connection they fail fast),
   * then its channels close; the connection layer closes the connection
   * after that.
   */
  async retire(): Promise<void> {
    this.#lost = true;
    this.#clearRetries();
    await this.cancelConsumers();
    await this.drained();
    await this.closeChannels();
  }

  /** Resolves once every request in flight on this session has settled. */
  async drained(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  /** Cancels every consumer that still has one; a channel already gone is skipped. */
  async cancelConsumers(): Promise<void> {
    await Promise.all(
      [...this.#lanes.values()].map(async ({ channel, consumerTag, consumed }) => {
        if (consumerTag === undefined) return;
        try {
          await channel.cancel(consumerTag);
        } catch (error) {
          if (!this.#lost) this.#log.warn({ err: error, queue: consumed.queue }, 'could not cancel the consumer');
        }
      }),
    );
  }

  /** Sends the acks still waiting for their turn, then closes every channel of the session. */
  async closeChannels(): Promise<void> {
    this.#clearRetries();
    for (const lane of this.#lanes.values()) {
      try {
        lane.acks.flush();
      } catch {
        // The channel is already gone; the broker redelivers what was not acked.
      }
      await lane.channel.close().catch(() => undefined);
    }
    await this.#events?.close();
    await this.#confirms.close().catch(() => undefined);
  }

  /** Lost, or the worker is closing: nothing more is opened on it. */
  #over(): boolean {
    return this.#lost || this.#options.closing();
  }

  /** Opens `consumed` on a channel of its own and starts consuming. */
  async #openLane(consumed: ConsumedQueue): Promise<void> {
    const channel = await this.#link.connection.createChannel();
    let lane: Lane | undefined;
    let channelError: Error | undefined;
    channel.on('error', (error: Error) => {
      channelError = error;
      // While the queue is being opened, the failure is reported by whoever waits for it (once, not per channel).
      if (lane === undefined)
        this.#log.debug({ err: error, queue: consumed.queue }, 'AMQP channel error while opening a queue');
      else this.#log.error({ err: error, queue: consumed.queue }, 'AMQP channel error');
    });
    channel.on('close', () => {
      this.#laneEnded(consumed, lane, closeReason('channel closed', channelError));
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
          this.#laneEnded(consumed, opened, 'consumer cancelled by the broker');
          return;
        }
        opened.acks.delivered(message.fields.deliveryTag);
        this.#track(opened, message);
      });
      opened.consumerTag = consumerTag;
      this.#lanes.set(consumed.role, opened);
      this.#log.info(
        { queue: consumed.queue, prefetch: consumed.prefetch, broker: this.#link.address.label },
        'consuming requests',
      );
    } catch (error) {
      await channel.close().catch(() => undefined);
      throw error;
    }
  }

  #track(lane: Lane, message: ConsumeMessage): void {
    const events = this.#events;
    const work = this.#options.handle({
      lane,
      message,
      confirms: this.#confirms,
      ...(events === undefined ? {} : { changesApplied: async () => events.changesApplied() }),
    });
    this.#inFlight.add(work);
    void work.finally(() => {
      this.#inFlight.delete(work);
    });
  }

  /**
   * A queue the worker serves but does not need (read, evaluate): a failure
   * to open it is logged, and it is tried again with the reconnect backoff
   * while the session lives. A classic queue homed on a node that is down
   * fails this way until the node is back.
   */
  async #openOptionalLane(consumed: ConsumedQueue, failures: number): Promise<void> {
    if (this.#over()) return;
    try {
      await this.#openLane(consumed);
      if (this.#over()) {
        // Lost or closing while it opened: nobody would cancel this consumer.
        await this.#lanes
          .get(consumed.role)
          ?.channel.close()
          .catch(() => undefined);
        return;
      }
      if (failures > 0) this.#log.info({ queue: consumed.queue }, 'consuming again a queue that was unavailable');
    } catch (error) {
      // Lost or closed while the queue was being opened.
      if (this.#over()) return;
      this.#scheduleOptionalLane(consumed, failures + 1, error);
    }
  }

  #scheduleOptionalLane(consumed: ConsumedQueue, failures: number, error: unknown): void {
    const { reconnectBaseMs } = this.#options.amqp;
    // Slower than reconnecting: what stops a queue (its node down, a
    // declaration that disagrees) takes seconds to minutes to clear, and
    // the worker serves meanwhile.
    const retryInMs = Math.max(
      reconnectBaseMs,
      backoffDelay({ baseMs: reconnectBaseMs, maxMs: OPTIONAL_QUEUE_RETRY_MAX_MS }, failures, this.#options.random),
    );
    const fields = {
      err: error,
      queue: consumed.queue,
      role: consumed.role,
      failures,
      retryInMs,
      broker: this.#link.address.label,
    };
    // Said at once, then now and again: not a line per attempt for as long as it lasts.
    if (failures === 1 || failures % OPTIONAL_QUEUE_WARN_EVERY === 0)
      this.#log.warn(fields, 'cannot consume this queue; serving the others and trying it again');
    else this.#log.debug(fields, 'cannot consume this queue yet');
    clearTimeout(this.#retries.get(consumed.role));
    const timer = setTimeout(() => {
      this.#retries.delete(consumed.role);
      void this.#openOptionalLane(consumed, failures);
    }, retryInMs);
    timer.unref();
    this.#retries.set(consumed.role, timer);
  }

  /** A lane's channel closed or its consumer was cancelled: the session goes if it needs the queue, else the queue is retried. */
  #laneEnded(consumed: ConsumedQueue, lane: Lane | undefined, reason: string): void {
    // A cancelled consumer ends here twice (the cancel, then its channel's close): only the first counts.
    const registered = lane !== undefined && this.#lanes.get(consumed.role) === lane;
    if (registered) this.#lanes.delete(consumed.role);
    if (this.#over()) return;
    if (consumed.required) {
      this.lose(`${consumed.role} queue: ${reason}`);
      return;
    }
    // Only a lane that was consuming is retried from here; one still being opened fails its own attempt.
    if (!registered) return;
    if (reason === 'consumer cancelled by the broker') void lane.channel.close().catch(() => undefined);
    this.#scheduleOptionalLane(consumed, 1, new Error(reason));
  }

  #clearRetries(): void {
    for (const timer of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
  }
}
