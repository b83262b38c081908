import type { Channel, ConsumeMessage } from 'amqplib';
import { BrokerConnection, closeReason, type BrokerLink } from '../amqp/broker-connection.js';
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
}

/** One partition queue being consumed. */
interface Lane {
  readonly channel: Channel;
  consumerTag: string;
  /** Verdicts are settled with the broker in delivery order: a part returned goes back before the ones after it. */
  settled: Promise<void>;
  readonly inFlight: Set<Promise<void>>;
  /**
   * Parts to return to the queue, in delivery order: returned only once the
   * consumer is cancelled. Returned while it still consumes, the broker
   * would deliver them straight back to it, interleaved with the next
   * returns, and their order would be lost.
   */
  readonly returns: ConsumeMessage[];
}

interface Session {
  readonly link: BrokerLink;
  readonly lanes: Map<number, Lane>;
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
        const session: Session = { link, lanes: new Map() };
        for (const partition of this.#wanted) await this.#open(session, partition);
        return session;
      },
      retire: async (session, reason) => {
        this.#log.warn({ reason }, 'lost the broker session of the delivery partitions');
        await Promise.allSettled([...session.lanes.values()].flatMap((lane) => [...lane.inFlight]));
      },
      logger: options.logger,
    });
  }

  /** Connects (in the background: partitions are consumed once a session is up). */
  start(): void {
    void this.#broker.start();
  }

  async subscribe(partition: number): Promise<void> {
    this.#wanted.add(partition);
    const session = this.#broker.current;
    if (session === undefined || session.link.lost || session.lanes.has(partition)) return;
    try {
      await this.#open(session, partition);
    } catch (error) {
      // The next session opens it.
      session.link.lose(closeReason(`cannot consume delivery partition ${String(partition)}`, error));
    }
  }

  async unsubscribe(partition: number): Promise<void> {
    this.#wanted.delete(partition);
    const session = this.#broker.current;
    const lane = session?.lanes.get(partition);
    if (session === undefined || lane === undefined) return;
    session.lanes.delete(partition);
    // Cancelled first: parts already delivered stay this channel's until settled, and no new one comes.
    await lane.channel.cancel(lane.consumerTag).catch(() => undefined);
    await Promise.allSettled([...lane.inFlight]);
    await lane.settled;
    try {
      for (const message of lane.returns) lane.channel.nack(message, false, true);
    } catch {
      // The channel is gone: the broker returns them itself.
    }
    await lane.channel.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.#broker.close(async (session) => {
      await Promise.all([...session.lanes.keys()].map(async (partition) => this.unsubscribe(partition)));
    });
  }

  async #open(session: Session, partition: number): Promise<void> {
    const { delivery, amqp } = this.#options;
    const queue = this.#options.queueOf(partition);
    const channel = await session.link.connection.createChannel();
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
    await declarePartitionQueue(channel, queue, delivery, amqp);
    await channel.prefetch(delivery.prefetch);
    const lane: Lane = { channel, consumerTag: '', settled: Promise.resolve(), inFlight: new Set(), returns: [] };
    const { consumerTag } = await channel.consume(queue, (message) => {
      if (message === null) {
        session.link.lose(`delivery partition ${String(partition)}: consumer cancelled by the broker`);
        return;
      }
      const verdict = this.#options.handle(partition, message);
      const previous = lane.settled;
      const settled = (async () => {
        const [outcome] = await Promise.all([verdict, previous]);
        try {
          if (outcome === 'ack') channel.ack(message);
          else if (outcome === 'requeue') lane.returns.push(message);
          else channel.nack(message, false, false);
        } catch {
          // The channel is gone: the broker returns the part to the queue.
        }
      })();
      lane.settled = settled;
      lane.inFlight.add(settled);
      void settled.finally(() => lane.inFlight.delete(settled));
    });
    lane.consumerTag = consumerTag;
    session.lanes.set(partition, lane);
    this.#log.debug({ queue }, 'consuming a delivery partition');
  }
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
