import { randomUUID } from 'node:crypto';
import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import { closeReason } from '../amqp/broker-link.js';
import type { ChangeListener } from './change-listener.js';

/** The AMQP `type` of the markers `changesApplied` sends through the worker's own event queue. */
const MARKER_TYPE = 'matrix-push-worker.changes-applied';
const EMPTY = Buffer.alloc(0);

export interface ChangeSubscriptionOptions {
  readonly eventsExchange: string;
  readonly listener: ChangeListener;
  readonly logger: Logger;
  /** The subscription ended: events may have been missed, so the session that owns it is lost. */
  readonly lost: (reason: string) => void;
}

interface Waiting {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/**
 * The change events of every worker, on a queue of this connection's own
 * (exclusive: it goes with the connection). A subscription that ends may
 * have missed events, so it ends the whole session, and the listener is
 * reset both when it ends and when the next one starts.
 *
 * A write is answered once the broker has confirmed its change events, so
 * they are on this worker's event queue before its caller can send
 * anything else; but the worker takes a request off another queue, and
 * the broker keeps no order between two queues. `changesApplied` closes
 * that gap: it sends a marker through the event queue itself and resolves
 * when the marker comes back, so every event queued before the call has
 * been applied by then. Calls in the same turn of the event loop share one
 * marker.
 */
export class ChangeSubscription {
  readonly #channel: Channel;
  readonly #queue: string;
  /** Marks this subscription's markers: nobody else's message can pass for one. */
  readonly #token = randomUUID();
  /** Markers sent and not back yet, in the order sent (which is the order they come back). */
  readonly #sent = new Map<number, Waiting>();
  /** Asked for in this turn, to be sent at the end of it. */
  #next: Waiting | undefined;
  #markers = 0;
  #ended: Error | undefined;

  private constructor(channel: Channel, queue: string) {
    this.#channel = channel;
    this.#queue = queue;
  }

  static async open(connection: ChannelModel, options: ChangeSubscriptionOptions): Promise<ChangeSubscription> {
    const { listener, logger, eventsExchange } = options;
    const channel = await connection.createChannel();
    let channelError: Error | undefined;
    // The channel may close while the queue is being declared, before there is a subscription to end.
    const made: { subscription?: ChangeSubscription } = {};
    const end = (reason: string) => {
      if (made.subscription !== undefined) made.subscription.#end(new Error(reason));
      listener.subscriptionReset();
      options.lost(reason);
    };
    channel.on('error', (error: Error) => {
      channelError = error;
      logger.error({ err: error }, 'AMQP change-event channel error');
    });
    channel.on('close', () => {
      end(closeReason('change-event subscription closed', channelError));
    });
    // Declared as `declareTopology` does: the subscription comes before the request queue's topology.
    await channel.assertExchange(eventsExchange, 'topic', { durable: true });
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    if (listener.pushRulesChanged !== undefined) await channel.bindQueue(queue, eventsExchange, 'm.push_rules');
    if (listener.pushersChanged !== undefined) await channel.bindQueue(queue, eventsExchange, 'm.pushers');
    const opened = new ChangeSubscription(channel, queue);
    made.subscription = opened;
    listener.subscriptionReset();
    await channel.consume(
      queue,
      (message) => {
        if (message === null) {
          end('change-event subscription cancelled by the broker');
          return;
        }
        if (opened.#markerCameBack(message)) return;
        const userId = changedUser(message.content);
        // An event we cannot read may be about anyone.
        if (userId === undefined) listener.subscriptionReset();
        else if (message.fields.routingKey === 'm.pushers') listener.pushersChanged?.(userId);
        else listener.pushRulesChanged?.(userId);
      },
      { noAck: true },
    );
    return opened;
  }

  /**
   * Resolves once every change event that was on this worker's event queue
   * when it was called has been applied (the listener told); rejects when
   * the subscription ends first, as what it waited for may be lost.
   */
  async changesApplied(): Promise<void> {
    if (this.#ended !== undefined) throw this.#ended;
    if (this.#next === undefined) {
      this.#next = waiting();
      setImmediate(() => {
        this.#sendMarker();
      });
    }
    return this.#next.promise;
  }

  async close(): Promise<void> {
    this.#end(new Error('change-event subscription closed'));
    await this.#channel.close().catch(() => undefined);
  }

  #sendMarker(): void {
    const next = this.#next;
    this.#next = undefined;
    if (next === undefined) return;
    if (this.#ended !== undefined) {
      next.reject(this.#ended);
      return;
    }
    this.#markers += 1;
    const marker = this.#markers;
    this.#sent.set(marker, next);
    try {
      // Through the default exchange, straight to this queue: behind every event already on it.
      this.#channel.sendToQueue(this.#queue, EMPTY, {
        type: MARKER_TYPE,
        correlationId: `${this.#token}/${String(marker)}`,
      });
    } catch (error) {
      this.#sent.delete(marker);
      next.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** A marker of this subscription: it and every one sent before it are through. */
  #markerCameBack(message: ConsumeMessage): boolean {
    if (message.fields.exchange !== '' || message.properties.type !== MARKER_TYPE) return false;
    const correlationId: unknown = message.properties.correlationId;
    const prefix = `${this.#token}/`;
    if (typeof correlationId !== 'string' || !correlationId.startsWith(prefix)) return false;
    const marker = Number(correlationId.slice(prefix.length));
    for (const [sent, waiter] of this.#sent) {
      if (sent > marker) break;
      this.#sent.delete(sent);
      waiter.resolve();
    }
    return true;
  }

  #end(error: Error): void {
    if (this.#ended !== undefined) return;
    this.#ended = error;
    for (const waiter of this.#sent.values()) waiter.reject(error);
    this.#sent.clear();
    this.#next?.reject(error);
    this.#next = undefined;
  }
}

function waiting(): Waiting {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A waiter may be rejected with nobody listening yet (the subscription ended in the same turn).
  promise.catch(() => undefined);
  return { promise, resolve, reject };
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
