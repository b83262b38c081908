import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from 'mongodb';
import { RpcClient } from '../client/rpc-client.js';
import { parseBrokerAddresses } from '../config/broker-urls.js';
import type { Config } from '../config/config-schema.js';
import type { ConsumedQueue } from '../consumer/consumed-queue.js';
import { notifyPartHandler } from '../consumer/notify-part-handler.js';
import { notifyLimits, notifyQueue, partitionQueue } from '../consumer/notify-queue.js';
import { NotifyRouter } from '../consumer/notify-router.js';
import { PartitionQueues } from '../consumer/partition-queues.js';
import { DEFAULT_BREAKER_POLICY } from '../delivery/circuit-breaker.js';
import { GatewayClient } from '../delivery-http/gateway-client.js';
import { gatewayAllowlistOf } from './gateway-allowlist-of.js';
import { CachedPusherLookup } from '../delivery-service/cached-pusher-lookup.js';
import { DeliveryJournal } from '../delivery-service/delivery-journal.js';
import type { DeliveryObserver } from '../delivery-service/delivery-observer.js';
import { DeliveryScheduler } from '../delivery-service/delivery-scheduler.js';
import { NotifyIntake } from '../delivery-service/notify-intake.js';
import { PartitionCoordinator } from '../delivery-service/partition-coordinator.js';
import { PartitionCountGuard } from '../delivery-service/partition-count-guard.js';
import { RejectedPushers } from '../delivery-service/rejected-pushers.js';
import { writeGraceMs } from '../delivery-service/write-grace.js';
import type { Logger } from '../logging/logger.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import type { ChangeEvent } from '../service/change-event.js';
import { MongoDeliveryStore } from '../store/mongo-delivery-store.js';
import { MongoPartitionLeaseStore } from '../store/mongo-partition-lease-store.js';
import type { MongoPushStore } from '../store/mongo-push-store.js';

/** Users whose pushers a worker keeps at most (the byte budget, `delivery.pusherCacheMaxBytes`, usually binds first). */
const PUSHER_CACHE_MAX_USERS = 2_000_000;

/** The push gateway client, from the configuration. */
export function gatewayClientOf(delivery: Config['delivery']): GatewayClient {
  const allowlist = gatewayAllowlistOf(delivery);
  return new GatewayClient({
    allowlist,
    maxInFlight: delivery.maxInFlight,
    maxInFlightPerOrigin: delivery.maxInFlightPerHost,
    maxInFlightPerAddress: delivery.maxInFlightPerAddress,
    maxInFlightPerUser: delivery.maxInFlightPerUser,
    connectTimeoutMs: delivery.connectTimeoutMs,
    headersTimeoutMs: delivery.headersTimeoutMs,
    bodyTimeoutMs: delivery.bodyTimeoutMs,
    maxBodyBytes: delivery.maxResponseBytes,
  });
}

export interface WorkerDeliveryOptions {
  readonly config: Readonly<Config>;
  readonly log: Logger;
  readonly db: Db;
  /** The pusher store: pushers read for delivery, rejected ones removed. */
  readonly store: MongoPushStore;
  readonly gateways: GatewayClient;
  readonly observer: DeliveryObserver & { emailPushersSkipped(count: number): void };
  /** Publishes a change event made outside a request (a rejected pusher removed); bound to the worker's session. */
  readonly announce: (change: ChangeEvent) => Promise<boolean>;
  /** Resolves once the change events queued for this worker are applied; bound to the worker's session. */
  readonly changesApplied: () => Promise<void>;
  /** The process is stopping. */
  readonly signal: AbortSignal;
}

/**
 * Push delivery on one worker (docs/delivery.md), wired from its
 * configuration: the router behind the `notify` queue, the partitions'
 * coordinator, their queues' consumers, the intake, the journal and the
 * scheduler. Its own broker connections (the partition queues, the
 * router's publisher); the `notify` queue itself is consumed on the
 * worker's session (`queue`).
 */
export class WorkerDelivery {
  readonly scheduler: DeliveryScheduler;
  readonly coordinator: PartitionCoordinator;
  readonly pushers: CachedPusherLookup;
  /** The `notify` queue, consumed on the worker's session. */
  readonly queue: ConsumedQueue;
  readonly #journal: DeliveryJournal;
  readonly #partitions: PartitionQueues;
  readonly #routerClient: RpcClient;
  readonly #routerStop = new AbortController();

  /**
   * Prepares the delivery collections and checks the pool's partition
   * count (both retried until done); undefined when the process stops
   * meanwhile.
   */
  static async open(options: WorkerDeliveryOptions): Promise<WorkerDelivery | undefined> {
    const { config, log, db, signal } = options;
    // A function, not the property: the signal flips it between awaits.
    const stopped = () => signal.aborted;
    const deliveryStore = new MongoDeliveryStore(db, {
      pendingCollection: config.delivery.pendingCollection,
      acceptedCollection: config.delivery.acceptedCollection,
      acceptedRetentionSeconds: config.delivery.acceptedRetentionSeconds,
      operationTimeoutMs: config.mongodb.operationTimeoutMs,
      partitions: config.delivery.partitions,
    });
    const storeBackoff = { baseMs: config.amqp.reconnectBaseMs, maxMs: config.amqp.reconnectMaxMs };
    await retryUntilDone(async () => deliveryStore.ensureIndexes(), {
      policy: storeBackoff,
      signal,
      onFailure: (error, attempt, retryInMs) => {
        log.warn({ err: error, attempt, retryInMs }, 'cannot prepare the delivery collections; retrying');
      },
    });
    if (stopped()) return undefined;
    // Every heartbeat carries this worker's partition count, and no round plans while the live workers disagree.
    const leases = new PartitionCountGuard(
      new MongoPartitionLeaseStore(db, {
        collectionPrefix: config.delivery.pendingCollection,
        operationTimeoutMs: config.mongodb.operationTimeoutMs,
      }),
      { partitions: config.delivery.partitions, logger: log },
    );
    // A worker whose count the live pool does not share does not start (docs/operations.md has the procedure);
    // once it starts, its first round moves what is stored under another count to its users' partitions.
    await leases.refuseMismatch({ signal, backoff: storeBackoff });
    if (stopped()) return undefined;
    return new WorkerDelivery(options, deliveryStore, leases);
  }

  private constructor(options: WorkerDeliveryOptions, deliveryStore: MongoDeliveryStore, leases: PartitionCountGuard) {
    const { config, log, store, gateways, observer, signal } = options;
    const me = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
    // The pushers of the users this worker delivers for, kept current by the m.pushers change events:
    // a fan-out to known users reads nothing from the store.
    const pushers = new CachedPusherLookup(store, {
      maxBytes: config.delivery.pusherCacheMaxBytes,
      maxEntries: PUSHER_CACHE_MAX_USERS,
      maxStalenessMs: config.delivery.pusherCacheMaxStalenessMs,
      changesApplied: options.changesApplied,
    });
    this.pushers = pushers;
    const rejected = new RejectedPushers(store, options.announce, log, {
      // This worker's caches drop the user even if the event cannot be published (other workers: their age bound).
      droppedHere: (userId) => {
        this.pushersChanged(userId);
      },
    });
    // Bound late: the coordinator decides what the scheduler and the intake may do, and drives them.
    const gate = {
      sendable: (partition: number, now: number) => this.coordinator.sendable(partition, now),
      takesIn: (partition: number, now: number) => this.coordinator.takesIn(partition, now),
    };
    // What is sent at once never touches the store: a part is acknowledged once its requests are done or stored.
    const journal = new DeliveryJournal({
      store: deliveryStore,
      writable: (partition, now) => this.coordinator.writable(partition, now),
      persistAfterMs: config.delivery.persistAfterMs,
      logger: log,
    });
    this.#journal = journal;
    const scheduler = new DeliveryScheduler({
      store: journal,
      gate,
      sender: gateways,
      pushers,
      remover: rejected,
      retry: {
        baseMs: config.delivery.retryBaseMs,
        maxMs: config.delivery.retryMaxMs,
        giveUpAfterMs: config.delivery.giveUpAfterMs,
      },
      backlog: { maxPending: config.delivery.maxPendingPerDevice },
      age: { maxAgeMs: config.delivery.maxAgeMs },
      breaker: { ...DEFAULT_BREAKER_POLICY, maxInFlight: config.delivery.maxInFlightPerHost },
      logger: log,
      observer,
      // A third of the shutdown's time: what is left deletes finished requests and hands the rest over.
      closeGraceMs: Math.floor(config.shutdown.timeoutMs / 3),
      abortSends: async () => gateways.destroy(),
    });
    this.scheduler = scheduler;
    const backoff = { baseMs: config.amqp.reconnectBaseMs, maxMs: config.amqp.reconnectMaxMs };
    const intake = new NotifyIntake({
      store: deliveryStore,
      journal,
      pushers,
      holder: scheduler,
      gate,
      backoff,
      signal,
      logger: log,
      observer,
    });
    // Parts are published as this pool's own broker user: the partition queues take them from it and from trusted publishers.
    const ownUser = brokerUser(config.amqp.url);
    const partitions = new PartitionQueues({
      amqp: config.amqp,
      delivery: config.delivery,
      logger: log,
      queueOf: (partition) => partitionQueue(config.delivery, partition),
      failed: (partition) => {
        this.coordinator.letGo(partition);
      },
      handle: notifyPartHandler({
        intake,
        limits: notifyLimits(config.delivery, config.limits.maxJsonDepth),
        publishers: new Set([...config.amqp.trustedPublishers, ownUser]),
        logger: log,
      }),
    });
    this.#partitions = partitions;
    this.coordinator = new PartitionCoordinator({
      me,
      partitions: config.delivery.partitions,
      leaseMs: config.delivery.leaseMs,
      leases,
      deliveries: deliveryStore,
      intake,
      journal,
      scheduler,
      consumer: partitions,
      graceMs: Math.floor(config.shutdown.timeoutMs / 3),
      writeGraceMs: writeGraceMs(config.mongodb, config.delivery.leaseMs),
      logger: log,
    });
    const routerClient = new RpcClient({
      url: config.amqp.url,
      queue: config.delivery.queue,
      publisherUserId: ownUser,
      heartbeatSeconds: config.amqp.heartbeatSeconds,
      connectTimeoutMs: config.amqp.connectTimeoutMs,
      reconnect: backoff,
      timeoutMs: 30_000,
      logger: log,
    });
    this.#routerClient = routerClient;
    const router = new NotifyRouter({
      partitions: config.delivery.partitions,
      queueOf: (partition) => partitionQueue(config.delivery, partition),
      sink: {
        publish: async (queue, body, messageId, publishedAt) =>
          routerClient.publish(body, { queue, messageId, noExpiration: true, timestamp: publishedAt }),
      },
      records: deliveryStore,
      backoff,
      replyWaitMs: config.delivery.replyWaitMs,
      // Not the shutdown's signal: a message given back while its queue is still consumed comes straight back
      // to this worker, out of order. Routing stops only after the consumers are cancelled (or the grace ran out).
      signal: this.#routerStop.signal,
      logger: log,
    });
    this.queue = notifyQueue({
      amqp: config.amqp,
      delivery: config.delivery,
      maxJsonDepth: config.limits.maxJsonDepth,
      router,
    });
  }

  /** The pushers of `userId` changed (a change event): the cache drops them, planned requests are checked again. */
  pushersChanged(userId: string): void {
    this.pushers.pushersChanged(userId);
    this.scheduler.pushersChanged(userId);
  }

  /** Change events may have been missed: every user's pushers are read again, every request checked. */
  changesMissed(): void {
    this.pushers.clear();
    this.scheduler.changesMissed();
  }

  /** The partition consumers, the journal and the coordinator start (the `notify` queue is the session's). */
  start(): void {
    this.#partitions.start();
    this.#journal.start();
    this.coordinator.start();
  }

  /** Routing stops: a `notify` taken now goes back to its queue (once the consumers are cancelled, or the grace ran out). */
  stopRouting(): void {
    this.#routerStop.abort();
  }

  /** The partitions handed over (intake, sends in flight, leases), then the connections closed. */
  async close(): Promise<void> {
    this.stopRouting();
    await this.coordinator.close();
    this.#journal.close();
    await this.scheduler.close();
    await this.#partitions.close();
    await this.#routerClient.close();
  }
}

/** The broker user of the first URL (amqplib's default when none is given): whom parts are published as. */
function brokerUser(urls: Readonly<Config['amqp']['url']>): string {
  const [first] = parseBrokerAddresses(urls);
  const user = first === undefined ? '' : decodeURIComponent(new URL(first.url).username);
  return user === '' ? 'guest' : user;
}
