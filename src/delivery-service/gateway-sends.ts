import type { Logger } from '../logging/logger.js';
import { bodyText } from '../delivery/request-body.js';
import { classifyExchange, type GatewayExchange, type ResponseOutcome } from '../delivery/response-outcome.js';
import type { PendingDelivery } from '../store/delivery-store.js';
import type { DeliveryObserver } from './delivery-observer.js';
import type { PartitionSends } from './partition-sends.js';

/** The HTTP client, as the scheduler uses it (delivery-http/gateway-client.ts). */
export interface GatewaySender {
  /**
   * `userId`: whose request it is, for the per-user cap on requests in flight; `signal` and `sendable`
   * withdraw it (`not-sent`, `withdrawn`) while it waits for a slot (gateway-client-options.ts `SendContext`).
   */
  send(
    url: string,
    body: string,
    context: { readonly userId: string; readonly signal?: AbortSignal; readonly sendable?: () => boolean },
  ): Promise<GatewayExchange>;
}

export interface GatewaySendsOptions {
  readonly sender: GatewaySender;
  /** Withdraws a partition's sends still waiting for a slot. */
  readonly sends: PartitionSends;
  /** Whether this worker may send for the partition now (its lease held, not in doubt). */
  readonly sendable: (partition: number, now: number) => boolean;
  /** The scheduler is closing. */
  readonly closed: () => boolean;
  readonly logger: Logger;
  readonly observer?: DeliveryObserver | undefined;
  readonly now: () => number;
}

/** A request's exchange with its gateway, and what it means for the device and the breaker. */
export interface SendResult {
  readonly exchange: GatewayExchange;
  readonly outcome: ResponseOutcome;
  /** When the exchange ended. */
  readonly now: number;
}

/**
 * One request to its gateway, the I/O of sending: it goes out only while
 * its partition is this worker's (asked again when it leaves its line in
 * the client), and the exchange is timed and classified. What follows
 * from the outcome is send-verdicts.ts's.
 */
export class GatewaySends {
  readonly #options: GatewaySendsOptions;
  /** Per partition, its `sendable` question: one closure per partition, not one per request. */
  readonly #sendable = new Map<number, () => boolean>();

  constructor(options: GatewaySendsOptions) {
    this.#options = options;
  }

  async send(partition: number, item: PendingDelivery): Promise<SendResult> {
    const { sender, sends, closed, now, observer } = this.#options;
    const started = performance.now();
    let exchange: GatewayExchange;
    try {
      exchange = await sender.send(item.url, bodyText(item.body), {
        userId: item.userId,
        signal: sends.signalOf(partition),
        // Asked again right before the request goes out: it may have waited past the lease's two thirds.
        sendable: this.#sendableOf(partition),
      });
    } catch (error) {
      // The client is closing (shutdown): the request stays in the store for the next holder.
      if (!closed()) this.#options.logger.error({ err: error }, 'gateway client failed unexpectedly');
      exchange = { kind: 'connection-error', reason: 'client-closed' };
    }
    const ended = now();
    if (exchange.kind !== 'address-refused' && exchange.kind !== 'not-sent')
      observer?.gatewayAnswered(item.url, (performance.now() - started) / 1000);
    return { exchange, outcome: classifyExchange(exchange, ended), now: ended };
  }

  #sendableOf(partition: number): () => boolean {
    let asked = this.#sendable.get(partition);
    if (asked === undefined) {
      const { closed, sendable, now } = this.#options;
      asked = () => !closed() && sendable(partition, now());
      // Partitions are numbered from 0 below the configured count: a handful of entries.
      this.#sendable.set(partition, asked);
    }
    return asked;
  }
}
