import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { AmqpConnectOptions } from '../amqp/amqp-connect.js';
import { BrokerConnection } from '../amqp/broker-connection.js';
import { closeReason, type BrokerLink } from '../amqp/broker-link.js';
import type { Config } from '../config/config-schema.js';
import type { Logger } from '../logging/logger.js';

/** What becomes of one `notify` part taken off a partition queue. */
export type PartVerdict =
  /** Stored: acknowledged. */
  | 'ack'
  /** Not stored (shutdown, handover): back to the queue, in order, for the partition's next holder, once unsubscribed. */
  | 'requeue'
  /** Refused (bad input, an untrusted publisher) or failing for good: dead-lettered for an operator. */
  | 'dead-letter';

export interface PartitionQueuesOptions {
  readonly amqp: Config['amqp'];
  readonly delivery: Config['delivery'];
  readonly logger: Logger;
  /** Takes one part in; never rejects. */
  readonly handle: (partition: number, message: ConsumeMessage) => Promise<PartVerdict>;
  /** The queue a partition's parts wait in. */
  readonly queueOf: (partition: number) => string;
  /**
   * A partition wanted could not be consumed on a new broker session (its
   * queue cannot be declared or consumed): it is no longer wanted here,
   * and its holder should let its lease go, so that it is not held unserved.
   */
  readonly failed?: (partition: number, error: unknown) => void;
  /** How a broker connection is opened; tests pass a fake. */
  readonly connect?: (url: string, options: AmqpConnectOptions) => Promise<ChannelModel>;
}

/** One partition queue being consumed. */
interface Lane {
  readonly channel: Channel;
  /** Verdicts are settled with the broker in delivery order: a part returned goes back before the ones after it. */
  settled: Promise<void>;
  readonly inFlight: Set<Promise<void>>;
  /**
   * Being let go: parts that still arrive are not taken in. They, and the
   * parts to return, stay unacknowledged until the channel closes, which
   * returns them all, in order (returned while the consumer is up, the
   * broker would deliver them straight back to it).
   */
  stopping: boolean;
}

interface Session {
  readonly link: BrokerLink;
  readonly lanes: Map<number, Lane>;
  /** Partitions whose consumer is being opened (declare, prefetch, consume): one open at a time each. */
  readonly opening: Map<number, Promise<void>>;
}

/**
 * The consumers of the partition queues this worker holds
 * (docs/delivery.md), on a broker connection of their own: the
 * coordinator subscribes a partition once it holds its lease and
 * unsubscribes it before it lets the lease go. Each partition queue has a
 * single active consumer, so even two workers that both believe they hold
 * a partition (one stalled past its lease) never take its parts in
 * concurrently.
 */
export class PartitionQueues {
  readonly #options: PartitionQueuesOptions;
  readonly #log: Logger;
  readonly #broker: BrokerConnection<Session>;
  /** The partitions to consume: consumed again on a new connection. */
  readonly #wanted = new Set<number>();
  /**
   * The session being set up, until it is live (and after: the same
   * object). A partition subscribed meanwhile is opened on it: the set-up
   * may have listed the wanted partitions before, and the connection hands
   * the session out only a few steps after the set-up returned.
   */
  #settingUp: Session | undefined;

  constructor(options: PartitionQueuesOptions) {
    this.#options = options;
    this.#log = options.logger;
    const { amqp } = options;
    this.#broker = new BrokerConnection<Session>({
      urls: amqp.url,
      role: 'matrix-push-worker delivery',
      heartbeatSeconds: amqp.heartbeatSeconds,
      attemptTimeoutMs: amqp.connectTimeoutMs,
      backoff: { baseMs: amqp.reconnectBaseMs, maxMs: amqp.reconnectMaxMs },
      setup: async (link) => {
        const session: Session = { link, lanes: new Map(), opening: new Map() };
        this.#settingUp = session;
        // Each on its own: one queue that cannot be consumed must not stop the others. Looked at again after
        // each: a partition subscribed meanwhile is wanted too.
        for (;;) {
          const partition = [...this.#wanted].find((p) => !session.lanes.has(p) && !session.opening.has(p));
          if (partition === undefined) break;
          try {
            await this.#open(session, partition);
          } catch (error) {
            if (link.lost) throw error;
            this.#cannotConsume(partition, error);
          }
        }
        await Promise.allSettled(session.opening.values());
        return session;
      },
      retire: async (session, reason) => {
        this.#log.warn({ reason }, 'lost the broker session of the delivery partitions');
        await Promise.allSettled([...session.lanes.values()].flatMap((lane) => [...lane.inFlight]));
      },
      logger: options.logger,
      ...(options.connect === undefined ? {} : { connect: options.connect }),
    });
  }

  /** Connects (in the background: partitions are consumed once a session is up). */
  start(): void {
    void this.#broker.start();
  }

  /**
   * Starts consuming the partition's queue (at once when a session is up,
   * else once one is). Rejects when the queue cannot be consumed (not
   * declared as expected, no quorum): the partition is then not wanted,
   * the others go on, and the caller lets its lease go.
   */
  async subscribe(partition: number): Promise<void> {
    this.#wanted.add(partition);
    const session = this.#session();
    if (session === undefined || session.lanes.has(partition)) return;
    const opening = session.opening.get(partition);
    if (opening !== undefined) return opening.catch(() => undefined);
    try {
      await this.#open(session, partition);
    } catch (error) {
      // The connection itself went (meanwhile: a property read would be narrowed): the next session opens it.
      if (isLost(session.link)) return;
      this.#wanted.delete(partition);
      throw new Error(`cannot consume delivery partition ${String(partition)}`, { cause: error });
    }
  }

  /**
   * Stops consuming the partition's queue; resolves once every part taken
   * in is settled and the broker has the rest back. No `basic.cancel`: a
   * cancelled single active consumer hands the queue to the next one at
   * once, before the parts it still holds are returned, and that one would
   * get newer parts first. So: nothing more taken in, the verdicts settled
   * in order, then the channel closed, which returns every part still
   * unacknowledged (sorted) before the broker activates the next consumer.
   */
  async unsubscribe(partition: number): Promise<void> {
    this.#wanted.delete(partition);
    const session = this.#session();
    // Being opened: let go once it is (a consumer opened after this returned would hold the queue unseen).
    await session?.opening.get(partition)?.catch(() => undefined);
    const lane = session?.lanes.get(partition);
    if (session === undefined || lane === undefined) return;
    session.lanes.delete(partition);
    lane.stopping = true;
    await Promise.allSettled([...lane.inFlight]);
    await lane.settled;
    await lane.channel.close().catch(() => undefined);
    this.#log.debug({ queue: this.#options.queueOf(partition) }, 'let a delivery partition queue go');
  }

  async close(): Promise<void> {
    await this.#broker.close(async (session) => {
      await Promise.all([...session.lanes.keys()].map(async (partition) => this.unsubscribe(partition)));
    });
  }

  /** The live session, or the one being set up; none while no connection is up. */
  #session(): Session | undefined {
    const session = this.#broker.current ?? this.#settingUp;
    return session === undefined || session.link.lost ? undefined : session;
  }

  #cannotConsume(partition: number, error: unknown): void {
    this.#wanted.delete(partition);
    this.#log.error(
      { err: error, partition, queue: this.#options.queueOf(partition) },
      'cannot consume a delivery partition queue: its lease is let go for another worker to try',
    );
    this.#options.failed?.(partition, error);
  }

  async #open(session: Session, partition: number): Promise<void> {
    const opening = this.#openLane(session, partition);
    session.opening.set(partition, opening);
    try {
      await opening;
    } finally {
      session.opening.delete(partition);
    }
  }

  async #openLane(session: Session, partition: number): Promise<void> {
    const { delivery, amqp } = this.#options;
    const queue = this.#options.queueOf(partition);
    const channel = await session.link.connection.createChannel();
    // A declaration or consume refused closes the channel: nothing of it is left open.
    const opened = async <T>(step: Promise<T>): Promise<T> =>
      step.catch(async (error: unknown) => {
        await channel.close().catch(() => undefined);
        throw error;
      });
    let channelError: Error | undefined;
    channel.on('error', (error: Error) => {
      channelError = error;
      this.#log.error({ err: error, queue }, 'AMQP channel error on a delivery partition');
    });
    channel.on('close', () => {
      // Closed by us (unsubscribe) or with the connection: only an unexpected close loses the session.
      if (session.lanes.get(partition)?.channel === channel)
        session.link.lose(closeReason(`delivery partition ${String(partition)} channel closed`, channelError));
    });
    await opened(declarePartitionQueue(channel, queue, delivery, amqp));
    await opened(channel.prefetch(delivery.prefetch));
    const lane: Lane = { channel, settled: Promise.resolve(), inFlight: new Set(), stopping: false };
    await opened(
      channel.consume(queue, (message) => {
        if (message === null) {
          session.link.lose(`delivery partition ${String(partition)}: consumer cancelled by the broker`);
          return;
        }
        // Left unacknowledged: the channel's close returns it, in order, to the partition's next holder.
        if (lane.stopping) return;
        const verdict = this.#options.handle(partition, message);
        const previous = lane.settled;
        const settled = (async () => {
          const [outcome] = await Promise.all([verdict, previous]);
          try {
            // A part to return stays unacknowledged until the channel closes (see `unsubscribe`).
            if (outcome === 'ack') channel.ack(message);
            else if (outcome === 'dead-letter') channel.nack(message, false, false);
          } catch {
            // The channel is gone: the broker returns the part to the queue.
          }
        })();
        lane.settled = settled;
        lane.inFlight.add(settled);
        void settled.finally(() => lane.inFlight.delete(settled));
      }),
    );
    session.lanes.set(partition, lane);
    this.#log.debug({ queue }, 'consuming a delivery partition');
  }
}

function isLost(link: BrokerLink): boolean {
  return link.lost;
}

/**
 * A partition queue: durable, of the delivery queue's type, with a single
 * active consumer, refusals dead-lettered. Declared the same way by the
 * router (which publishes to it) and by the consumer.
 */
export async function declarePartitionQueue(
  channel: Channel,
  queue: string,
  delivery: Config['delivery'],
  amqp: Config['amqp'],
): Promise<void> {
  await channel.assertQueue(queue, {
    durable: true,
    arguments: {
      'x-queue-type': delivery.queueType,
      'x-single-active-consumer': true,
      'x-dead-letter-exchange': amqp.deadLetterExchange,
    },
  });
}
