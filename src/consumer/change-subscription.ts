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

/** A marker on its way: the requests taken before it was sent (`covers`) wait for it. */
interface Marker extends Waiting {
  readonly covers: number;
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
 * that gap: a marker sent through the event queue after the request was
 * taken comes back behind every event queued before the request was sent.
 * A marker covers every request taken before it was sent, so under load
 * most requests find one on its way (or back already) and send none.
 */
export class ChangeSubscription {
  readonly #channel: Channel;
  readonly #queue: string;
  /** Marks this subscription's markers: nobody else's message can pass for one. */
  readonly #token = randomUUID();
  /** Markers sent and not back yet, by number, in the order sent (which is the order they come back). */
  readonly #sent = new Map<number, Marker>();
  /** The newest marker sent. */
  #latest: Marker | undefined;
  /** Requests taken so far (`taken`): a marker covers those taken before it was sent. */
  #taken = 0;
  /** What the markers back so far cover: requests up to this one need not wait. */
  #coveredBack = 0;
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

  /** A request was taken off a queue of this connection: its ticket for `changesApplied`. */
  taken(): number {
    this.#taken += 1;
    return this.#taken;
  }

  /**
   * Resolves once every change event that was on this worker's event queue
   * when the request of `ticket` was taken (`taken`) has been applied (the
   * listener told); without a ticket, those on it now. Rejects when the
   * subscription ends first, as what it waited for may be lost.
   */
  async changesApplied(ticket: number = this.taken()): Promise<void> {
    if (this.#ended !== undefined) throw this.#ended;
    if (this.#coveredBack >= ticket) return;
    const latest = this.#latest;
    if (latest !== undefined && latest.covers >= ticket) return latest.promise;
    return this.#sendMarker().promise;
  }

  async close(): Promise<void> {
    this.#end(new Error('change-event subscription closed'));
    await this.#channel.close().catch(() => undefined);
  }

  #sendMarker(): Marker {
    this.#markers += 1;
    const number = this.#markers;
    const marker = { ...waiting(), covers: this.#taken };
    this.#sent.set(number, marker);
    this.#latest = marker;
    try {
      // Through the default exchange, straight to this queue: behind every event already on it.
      this.#channel.sendToQueue(this.#queue, EMPTY, {
        type: MARKER_TYPE,
        correlationId: `${this.#token}/${String(number)}`,
      });
    } catch (error) {
      this.#sent.delete(number);
      this.#latest = undefined;
      marker.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return marker;
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
      this.#coveredBack = Math.max(this.#coveredBack, waiter.covers);
      waiter.resolve();
    }
    return true;
  }

  #end(error: Error): void {
    if (this.#ended !== undefined) return;
    this.#ended = error;
    for (const waiter of this.#sent.values()) waiter.reject(error);
    this.#sent.clear();
    this.#latest = undefined;
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
