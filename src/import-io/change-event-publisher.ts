import type { ChannelModel, ConfirmChannel } from 'amqplib';
import { connectAmqp } from '../amqp/amqp-connect.js';
import type { BrokerAddress } from '../config/broker-urls.js';
import { WIRE_VERSION_HEADERS } from '../contract/wire-version.js';

/** What the workers publish after a write (docs/rpc-contract.md#change-events), the same for an import. */
export interface ChangeEvent {
  readonly user_id: string;
  readonly type: 'm.push_rules' | 'm.pushers';
  readonly version: number;
}

/** Where an import announces what it wrote; `publish` resolves once every event is confirmed. */
export interface ChangeEventSink {
  publish(events: readonly ChangeEvent[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * Change events on the broker, as the workers publish them: JSON
 * `{user_id, type, version}` to the topic exchange (`amqp.eventsExchange`),
 * routing key the type, persistent, with publisher confirms. A batch's
 * events are confirmed before the next batch is read, so a run that ends
 * has announced everything it wrote. The exchange is declared as the
 * workers declare it, in case none has run yet.
 */
export class AmqpChangeEventPublisher implements ChangeEventSink {
  readonly #model: ChannelModel;
  readonly #channel: ConfirmChannel;
  readonly #exchange: string;

  private constructor(model: ChannelModel, channel: ConfirmChannel, exchange: string) {
    this.#model = model;
    this.#channel = channel;
    this.#exchange = exchange;
  }

  /** Connects to the first node that answers; throws an error naming the nodes tried (never their credentials). */
  static async connect(
    addresses: readonly BrokerAddress[],
    exchange: string,
    timeoutMs: number,
  ): Promise<AmqpChangeEventPublisher> {
    const failures: string[] = [];
    for (const address of addresses) {
      let model: ChannelModel | undefined;
      try {
        model = await connectAmqp(address.url, { timeoutMs, connectionName: 'matrix-push-import' });
        model.on('error', () => undefined);
        const channel = await model.createConfirmChannel();
        channel.on('error', () => undefined);
        await channel.assertExchange(exchange, 'topic', { durable: true });
        return new AmqpChangeEventPublisher(model, channel, exchange);
      } catch (error) {
        await model?.close().catch(() => undefined);
        failures.push(`${address.label}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    throw new Error(`cannot connect to the broker for change events (${failures.join('; ')})`);
  }

  async publish(events: readonly ChangeEvent[]): Promise<void> {
    if (events.length === 0) return;
    for (const event of events) {
      this.#channel.publish(this.#exchange, event.type, Buffer.from(JSON.stringify(event)), {
        contentType: 'application/json',
        persistent: true,
        // As the workers' own events: a consumer reads the wire version from it (docs/rpc-contract.md).
        headers: WIRE_VERSION_HEADERS,
      });
    }
    await this.#channel.waitForConfirms();
  }

  async close(): Promise<void> {
    await this.#channel.close().catch(() => undefined);
    await this.#model.close().catch(() => undefined);
  }
}
