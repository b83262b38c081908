import { EventEmitter } from 'node:events';
import type { ChannelModel } from 'amqplib';
import type { AmqpConnectOptions } from '../../src/amqp/amqp-connect.js';

/** A connection as far as the layer uses it: `close()`, and the `close` event when it goes. */
export class FakeConnection extends EventEmitter {
  closed = false;
  constructor(readonly node: string) {
    super();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.resolve();
    this.emit('close');
  }

  /** The broker side went away: amqplib emits `close`, with why when it knows. */
  drop(error?: unknown): void {
    this.closed = true;
    this.emit('close', error);
  }
}

/** The broker: which nodes answer, and a log of what the layer did. */
export class FakeBroker {
  readonly events: string[] = [];
  readonly connections: FakeConnection[] = [];
  readonly down = new Set<string>();
  readonly options: AmqpConnectOptions[] = [];

  readonly connect = async (url: string, options: AmqpConnectOptions): Promise<ChannelModel> => {
    await Promise.resolve();
    const node = new URL(url).hostname;
    this.events.push(`attempt ${node}`);
    this.options.push(options);
    if (this.down.has(node)) throw new Error(`connect ECONNREFUSED ${node}`);
    const connection = new FakeConnection(node);
    this.connections.push(connection);
    return connection as unknown as ChannelModel;
  };

  /** Records the wait and lets the event loop turn (a real wait would), without the time passing. */
  readonly wait = async (ms: number): Promise<void> => {
    this.events.push(`wait ${ms}`);
    await new Promise((resolve) => setImmediate(resolve));
  };

  live(): FakeConnection | undefined {
    return this.connections.filter((c) => !c.closed).at(-1);
  }
}
