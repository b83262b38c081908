import type { Channel, ChannelModel } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import type { AmqpConnectOptions } from '../amqp/amqp-connect.js';
import { BrokerConnection } from '../amqp/broker-connection.js';
import type { BrokerLink } from '../amqp/broker-link.js';
import type { QueueCounts, QueueProbe } from './queue-depth-metrics.js';

export type BrokerQueueProbeSettings = Pick<
  Config['amqp'],
  'url' | 'heartbeatSeconds' | 'connectTimeoutMs' | 'reconnectBaseMs' | 'reconnectMaxMs'
>;

interface Checker {
  readonly link: BrokerLink;
  readonly channel: Promise<Channel>;
}

/**
 * Counts queues (a passive `checkQueue`: ready messages and consumers) on a
 * broker connection of its own, named `<role> <host>:<pid>` in the broker's
 * tools. Its own, and not a channel on the worker's: that connection is the
 * worker's private state. It costs one more connection per process, opened
 * at the first count and kept (reconnected like any other, to any node of
 * `url`); a count while no node answers rejects at once.
 */
export class BrokerQueueProbe implements QueueProbe {
  readonly #broker: BrokerConnection<BrokerLink>;
  #checker: Checker | undefined;

  constructor(
    settings: BrokerQueueProbeSettings,
    options: {
      readonly role?: string;
      /** How a connection is opened; tests pass a fake. */
      readonly connect?: (url: string, options: AmqpConnectOptions) => Promise<ChannelModel>;
    } = {},
  ) {
    this.#broker = new BrokerConnection<BrokerLink>({
      urls: settings.url,
      role: options.role ?? 'matrix-push-worker queue-depth',
      heartbeatSeconds: settings.heartbeatSeconds,
      attemptTimeoutMs: settings.connectTimeoutMs,
      backoff: { baseMs: settings.reconnectBaseMs, maxMs: settings.reconnectMaxMs },
      setup: async (link) => Promise.resolve(link),
      ...(options.connect === undefined ? {} : { connect: options.connect }),
    });
  }

  async check(queue: string): Promise<QueueCounts> {
    const link = await this.#broker.session();
    const channel = await this.#channelOn(link);
    const { messageCount, consumerCount } = await channel.checkQueue(queue);
    return { messageCount, consumerCount };
  }

  /** Closes the connection; a count after this rejects. */
  async close(): Promise<void> {
    await this.#broker.close();
  }

  /** One channel per connection, opened again after the broker closed it (a queue that is not there does). */
  async #channelOn(link: BrokerLink): Promise<Channel> {
    let checker = this.#checker;
    if (checker?.link !== link) {
      const opening: Checker = {
        link,
        channel: link.connection.createChannel().then((channel) => {
          channel.on('error', () => undefined);
          channel.on('close', () => {
            if (this.#checker === opening) this.#checker = undefined;
          });
          return channel;
        }),
      };
      void opening.channel.catch(() => {
        if (this.#checker === opening) this.#checker = undefined;
      });
      this.#checker = checker = opening;
    }
    return checker.channel;
  }
}
