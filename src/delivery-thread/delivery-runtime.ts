import { MongoClient } from 'mongodb';
import type { Config } from '../config/config-schema.js';
import type { GatewayClient } from '../delivery-http/gateway-client.js';
import { RpcWorker } from '../consumer/rpc-worker.js';
import type { Logger } from '../logging/logger.js';
import { DeliveryMetrics } from '../observability/delivery-metrics.js';
import { WorkerMetrics } from '../observability/metrics.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import { mongoClientOptions } from '../store/mongo-client-options.js';
import { MongoPushStore } from '../store/mongo-push-store.js';
import { gatewayClientOf, WorkerDelivery } from './worker-delivery.js';

/**
 * Push delivery with everything it needs of its own: a MongoDB client, the
 * gateway client, `WorkerDelivery`, and a broker session (`RpcWorker` with
 * no request queue) that consumes the `notify` queue, hears the pool's
 * `m.pushers` change events and publishes the ones delivery makes (a
 * rejected pusher removed). Its metrics are on a registry of its own, which
 * the worker's `/metrics` merges with the main thread's. What the delivery
 * thread runs (delivery-thread.ts); nothing here touches the thread's port.
 */
export class DeliveryRuntime {
  /** Delivery's metrics and the `notify` queue's requests; no process metrics (the main thread has those). */
  readonly metrics: WorkerMetrics;
  readonly #config: Readonly<Config>;
  readonly #log: Logger;
  readonly #stop = new AbortController();
  readonly #mongo: MongoClient;
  readonly #gateways: GatewayClient;
  readonly #deliveryMetrics: DeliveryMetrics;
  #delivery: WorkerDelivery | undefined;
  #worker: RpcWorker | undefined;
  #closing: Promise<void> | undefined;

  constructor(config: Readonly<Config>, log: Logger) {
    this.#config = config;
    this.#log = log;
    this.metrics = new WorkerMetrics(() => this.#worker?.inFlight ?? 0, {
      processMetrics: false,
      session: 'delivery',
      queues: { all: ['deliver'], consumed: () => this.#worker?.consumedQueues ?? [] },
    });
    this.#deliveryMetrics = new DeliveryMetrics(
      this.metrics.registry,
      () => this.#delivery?.scheduler,
      Date.now,
      () => {
        const delivery = this.#delivery;
        return delivery === undefined
          ? undefined
          : { partitions: delivery.coordinator.partitions, pusherCache: delivery.pushers.stats };
      },
    );
    this.#gateways = gatewayClientOf(config.delivery);
    this.#mongo = new MongoClient(config.mongodb.url, mongoClientOptions(config.mongodb));
  }

  /** Consuming the `notify` queue on a live broker session. */
  get consuming(): boolean {
    return this.#worker?.consuming ?? false;
  }

  /**
   * Connects, opens delivery (its collections, the pool's partition count:
   * a `PartitionCountMismatchError` rejects) and starts it; false when it
   * was closed meanwhile.
   */
  async start(): Promise<boolean> {
    const config = this.#config;
    const log = this.#log;
    const signal = this.#stop.signal;
    // Connected explicitly on each attempt, as the main thread does: after a failed first connection the
    // driver's topology stays closed and never tries again.
    await retryUntilDone(async () => this.#mongo.connect().then(() => undefined), {
      policy: { baseMs: config.amqp.reconnectBaseMs, maxMs: config.amqp.reconnectMaxMs },
      signal,
      onFailure: (error, attempt, retryInMs) => {
        log.warn({ err: error, attempt, retryInMs }, 'cannot reach MongoDB; retrying');
      },
    });
    if (signal.aborted) return false;
    const db = this.#mongo.db(config.mongodb.database);
    const store = new MongoPushStore(db, {
      ...config.mongodb,
      recordedWritesWindow: config.writes.recordedWritesWindow,
      parsedCacheChars: config.mongodb.parsedRulesCacheChars,
    });
    const delivery = await WorkerDelivery.open({
      config,
      log,
      db,
      store,
      gateways: this.#gateways,
      observer: this.#deliveryMetrics,
      announce: async (change) => this.#worker?.announce(change) ?? false,
      changesApplied: async () => {
        if (this.#worker === undefined) throw new Error('no broker session yet: change events cannot be waited for');
        return this.#worker.changesApplied();
      },
      signal,
    });
    // `open` gives nothing once closed, so nothing below is made after `close` began.
    if (delivery === undefined) return false;
    this.#delivery = delivery;
    const worker = new RpcWorker(undefined, {
      amqp: config.amqp,
      userOps: [],
      queues: [delivery.queue],
      // Only the pushers' events: the push rules are the main thread's caches' business.
      changes: {
        pushersChanged: (userId) => {
          delivery.pushersChanged(userId);
        },
        subscriptionReset: () => {
          delivery.changesMissed();
        },
      },
      limits: config.limits,
      logger: log,
      observer: this.metrics,
    });
    this.#worker = worker;
    delivery.start();
    await worker.start();
    return !signal.aborted;
  }

  /**
   * As a worker's shutdown did before delivery had a thread: no `notify`
   * taken any more (routing stops at the latest after a third of the
   * shutdown's time), the partitions handed over (intake, sends in flight,
   * leases), then the connections. Idempotent.
   */
  async close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    this.#stop.abort();
    const routing = setTimeout(
      () => {
        this.#delivery?.stopRouting();
      },
      Math.floor(this.#config.shutdown.timeoutMs / 3),
    );
    await this.#worker?.close();
    clearTimeout(routing);
    await this.#delivery?.close();
    await this.#gateways.close();
    await this.#mongo.close().catch(() => undefined);
  }
}
