import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { MongoClient } from 'mongodb';
import type { Config } from './config/config-schema.js';
import { ConfigError } from './config/load-config.js';
import type { ServiceProcess } from './lifecycle/run-process.js';
import type { Logger } from './logging/logger.js';
import { BrokerQueueProbe } from './observability/broker-queue-probe.js';
import { HealthServer } from './observability/health-server.js';
import { WorkerMetrics } from './observability/metrics.js';
import { registerReadCacheMetrics } from './observability/cache-metrics.js';
import { QueueDepthMetrics } from './observability/queue-depth-metrics.js';
import type { Command } from './service/command.js';
import { notifyLimits, notifyQueue, partitionQueue } from './consumer/notify-queue.js';
import { notifyPartHandler } from './consumer/notify-part-handler.js';
import { NotifyRouter } from './consumer/notify-router.js';
import { PartitionQueues } from './consumer/partition-queues.js';
import { RpcClient } from './client/rpc-client.js';
import { parseBrokerAddresses } from './config/broker-urls.js';
import { PartitionCoordinator } from './delivery-service/partition-coordinator.js';
import { CachedPusherLookup } from './delivery-service/cached-pusher-lookup.js';
import { DeliveryJournal } from './delivery-service/delivery-journal.js';
import { writeGraceMs } from './delivery-service/write-grace.js';
import { PartitionCountGuard } from './delivery-service/partition-count-guard.js';
import { MongoPartitionLeaseStore } from './store/mongo-partition-lease-store.js';
import { parseAddressAllowlist } from './delivery/address-allowlist.js';
import { DEFAULT_BREAKER_POLICY } from './delivery/circuit-breaker.js';
import { GatewayClient } from './delivery-http/gateway-client.js';
import { DeliveryScheduler } from './delivery-service/delivery-scheduler.js';
import { NotifyIntake } from './delivery-service/notify-intake.js';
import { RejectedPushers } from './delivery-service/rejected-pushers.js';
import { DeliveryMetrics } from './observability/delivery-metrics.js';
import { MongoDeliveryStore } from './store/mongo-delivery-store.js';
import { evaluateQueue } from './consumer/evaluate-queue.js';
import { summedCacheView } from './evaluate-threads/cache-view.js';
import { Evaluator } from './evaluate-threads/evaluator.js';
import { RpcWorker } from './consumer/rpc-worker.js';
import { mongoClientOptions } from './store/mongo-client-options.js';
import { MongoPushStore } from './store/mongo-push-store.js';
import type { LoadedPushRules } from './store/push-store.js';
import { RulesetCache } from './service/ruleset-cache.js';
import { PushService } from './service/push-service.js';
import { retryUntilDone } from './retry/retry-until-done.js';

/** Users whose pushers a worker keeps at most (the byte budget, `delivery.pusherCacheMaxBytes`, usually binds first). */
const PUSHER_CACHE_MAX_USERS = 2_000_000;

/** Run around serving each parsed request of the request and read queues; only the fault tests' entry point sets them. */
export interface ServeHooks {
  readonly beforeServe?: (command: Command) => void;
  readonly afterServe?: (command: Command) => void;
}

/**
 * One worker process, wired from its configuration: the store, the
 * services, the queues, metrics and health. `npm start` runs it through
 * `runProcess` (src/main.ts).
 */
export function createWorkerProcess(
  config: Readonly<Config>,
  log: Logger,
  stop: AbortController,
  hooks: ServeHooks = {},
): ServiceProcess {
  // Read by V8 at every full collection, so it applies from here on.
  if (config.runtime.heapGrowingPercent > 0)
    setFlagsFromString(`--heap-growing-percent=${config.runtime.heapGrowingPercent}`);
  // A function, not the property: signals flip it between awaits.
  const stopped = () => stop.signal.aborted;
  // Created once the database answers; signals and probes may come sooner.
  const running: {
    worker?: RpcWorker;
    scheduler?: DeliveryScheduler;
    coordinator?: PartitionCoordinator;
    partitions?: PartitionQueues;
    routerClient?: RpcClient;
    pushers?: CachedPusherLookup;
    journal?: DeliveryJournal;
    evaluator?: Evaluator;
  } = {};

  const readCache =
    config.reads.cacheMaxEntries > 0
      ? new RulesetCache<LoadedPushRules>({
          maxEntries: config.reads.cacheMaxEntries,
          maxBytes: config.reads.cacheMaxBytes,
          maxStalenessMs: config.reads.maxStalenessMs,
        })
      : undefined;
  const metrics = new WorkerMetrics(() => running.worker?.inFlight ?? 0, {
    // The compiled rulesets of `evaluate`, on the event loop and in the threads, kept current by the change events.
    cache: summedCacheView(() => (running.evaluator === undefined ? [] : [running.evaluator.cache])),
    queues: { all: ['request', 'read', 'evaluate', 'deliver'], consumed: () => running.worker?.consumedQueues ?? [] },
  });
  if (readCache !== undefined) registerReadCacheMetrics(metrics.registry, readCache);
  const deliveryMetrics = new DeliveryMetrics(
    metrics.registry,
    () => running.scheduler,
    Date.now,
    () =>
      running.coordinator === undefined || running.pushers === undefined
        ? undefined
        : { partitions: running.coordinator.partitions, pusherCache: running.pushers.stats },
  );
  // Checked here, before anything starts: a mistyped range stops the worker at start, not at the first push.
  const allowlist = gatewayAllowlist(config.delivery.gatewayIpAllowlist);
  const gateways = new GatewayClient({
    allowlist,
    maxInFlight: config.delivery.maxInFlight,
    maxInFlightPerOrigin: config.delivery.maxInFlightPerHost,
    maxInFlightPerAddress: config.delivery.maxInFlightPerAddress,
    maxInFlightPerUser: config.delivery.maxInFlightPerUser,
    connectTimeoutMs: config.delivery.connectTimeoutMs,
    headersTimeoutMs: config.delivery.headersTimeoutMs,
    bodyTimeoutMs: config.delivery.bodyTimeoutMs,
    maxBodyBytes: config.delivery.maxResponseBytes,
  });
  // Its own broker connection, opened at the first scrape.
  const depth = new BrokerQueueProbe(config.amqp);
  new QueueDepthMetrics('push_worker', metrics.registry, {
    probe: depth,
    queues: {
      request: config.amqp.queue,
      read: config.amqp.readQueue,
      evaluate: config.evaluate.queue,
      deliver: config.delivery.queue,
      'dead-letter': config.amqp.deadLetterQueue,
    },
  });
  const mongo = new MongoClient(config.mongodb.url, mongoClientOptions(config.mongodb));
  const db = mongo.db(config.mongodb.database);
  const health = config.health.enabled
    ? new HealthServer({
        host: config.health.host,
        port: config.health.port,
        probes: { consuming: () => running.worker?.consuming ?? false, database: async () => ping(db) },
        metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
      })
    : undefined;

  const routerStop = new AbortController();

  const start = async (): Promise<void> => {
    const store = new MongoPushStore(db, {
      ...config.mongodb,
      recordedWritesWindow: config.writes.recordedWritesWindow,
      parsedCacheChars: config.mongodb.parsedRulesCacheChars,
    });
    // Until the database first answers there is nothing to serve, so wait
    // for it here. Connect explicitly on each attempt: after a failed first
    // connection the driver's topology stays closed ("Topology is closed")
    // and its auto-connect never tries again. Once connected, the driver
    // reconnects by itself.
    await retryUntilDone(
      async () => {
        await mongo.connect();
        await store.ensureIndexes();
      },
      {
        policy: { baseMs: config.amqp.reconnectBaseMs, maxMs: config.amqp.reconnectMaxMs },
        signal: stop.signal,
        onFailure: (error, attempt, retryInMs) => {
          log.warn({ err: error, attempt, retryInMs }, 'cannot reach MongoDB; retrying');
        },
      },
    );
    if (stopped()) return;

    const service = new PushService(store, {
      maxWriteAttempts: config.writes.maxAttempts,
      backoff: { baseMs: config.writes.backoffBaseMs, maxMs: config.writes.backoffMaxMs },
      pusherPolicy: { allowInsecureGateways: config.pushers.allowInsecureGateways },
      limits: config.limits,
      rulesetCharsInFlight: config.writes.rulesetCharsInFlight,
      operationTimeoutMs: config.mongodb.operationTimeoutMs,
      observer: metrics,
      ...(readCache === undefined ? {} : { readCache }),
      // A write answered Unavailable but applied afterwards: announced once it settled.
      announceLate: async (changes) => Promise.all(changes.map(async (change) => running.worker?.announce(change))),
    });
    const evaluator = new Evaluator({
      evaluate: config.evaluate,
      mongodb: config.mongodb,
      maxJsonDepth: config.limits.maxJsonDepth,
      store,
      logger: log,
      observer: metrics,
    });
    running.evaluator = evaluator;
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
      signal: stop.signal,
      onFailure: (error, attempt, retryInMs) => {
        log.warn({ err: error, attempt, retryInMs }, 'cannot prepare the delivery collections; retrying');
      },
    });
    if (stopped()) return;
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
    await leases.refuseMismatch({ signal: stop.signal, backoff: storeBackoff });
    if (stopped()) return;
    const me = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
    // The pushers of the users this worker delivers for, kept current by the m.pushers change events:
    // a fan-out to known users reads nothing from the store.
    const pushers = new CachedPusherLookup(store, {
      maxBytes: config.delivery.pusherCacheMaxBytes,
      maxEntries: PUSHER_CACHE_MAX_USERS,
      maxStalenessMs: config.delivery.pusherCacheMaxStalenessMs,
    });
    running.pushers = pushers;
    const rejected = new RejectedPushers(store, async (change) => running.worker?.announce(change) ?? false, log, {
      // This worker's caches drop the user even if the event cannot be published (other workers: their age bound).
      droppedHere: (userId) => {
        pushers.pushersChanged(userId);
        scheduler.pushersChanged(userId);
      },
    });
    // Bound late: the coordinator decides what the scheduler and the intake may do, and drives them.
    const gate = {
      sendable: (partition: number, now: number) => running.coordinator?.sendable(partition, now) ?? false,
      takesIn: (partition: number, now: number) => running.coordinator?.takesIn(partition, now) ?? false,
    };
    // What is sent at once never touches the store: a part is acknowledged once its requests are done or stored.
    const journal = new DeliveryJournal({
      store: deliveryStore,
      writable: (partition, now) => running.coordinator?.writable(partition, now) ?? false,
      persistAfterMs: config.delivery.persistAfterMs,
      logger: log,
    });
    running.journal = journal;
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
      observer: deliveryMetrics,
      // A third of the shutdown's time: what is left deletes finished requests and hands the rest over.
      closeGraceMs: Math.floor(config.shutdown.timeoutMs / 3),
      abortSends: async () => gateways.destroy(),
    });
    running.scheduler = scheduler;
    const backoff = { baseMs: config.amqp.reconnectBaseMs, maxMs: config.amqp.reconnectMaxMs };
    const intake = new NotifyIntake({
      store: deliveryStore,
      journal,
      pushers,
      holder: scheduler,
      gate,
      backoff,
      signal: stop.signal,
      logger: log,
      observer: deliveryMetrics,
    });
    // Parts are published as this pool's own broker user: the partition queues take them from it and from trusted publishers.
    const ownUser = brokerUser(config.amqp.url);
    const partitions = new PartitionQueues({
      amqp: config.amqp,
      delivery: config.delivery,
      logger: log,
      queueOf: (partition) => partitionQueue(config.delivery, partition),
      failed: (partition) => {
        running.coordinator?.letGo(partition);
      },
      handle: notifyPartHandler({
        intake,
        limits: notifyLimits(config.delivery, config.limits.maxJsonDepth),
        publishers: new Set([...config.amqp.trustedPublishers, ownUser]),
        logger: log,
      }),
    });
    running.partitions = partitions;
    running.coordinator = new PartitionCoordinator({
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
    running.routerClient = routerClient;
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
      signal: routerStop.signal,
      logger: log,
    });
    const worker = new RpcWorker(service, {
      amqp: config.amqp,
      queues: [
        evaluateQueue({
          amqp: config.amqp,
          evaluate: config.evaluate,
          run: evaluator.run,
          observer: metrics,
        }),
        notifyQueue({ amqp: config.amqp, delivery: config.delivery, maxJsonDepth: config.limits.maxJsonDepth, router }),
      ],
      changes: {
        pushRulesChanged: (userId) => {
          readCache?.invalidate(userId);
          evaluator.invalidate(userId);
        },
        pushersChanged: (userId) => {
          pushers.pushersChanged(userId);
          scheduler.pushersChanged(userId);
        },
        subscriptionReset: () => {
          readCache?.clear();
          evaluator.clear();
          pushers.clear();
          scheduler.changesMissed();
        },
      },
      limits: config.limits,
      logger: log,
      observer: metrics,
      ...hooks,
    });
    running.worker = worker;
    partitions.start();
    journal.start();
    running.coordinator.start();
    await worker.start();
    if (!stopped()) log.info({ database: config.mongodb.database }, 'worker started');
  };

  return {
    health,
    healthHost: config.health.host,
    inFlight: () => running.worker?.inFlight ?? 0,
    close: async () => {
      // Routing first (no new notify taken), then the partitions (intake, sends in flight, leases handed over),
      // then the connections.
      const routing = setTimeout(
        () => {
          routerStop.abort();
        },
        Math.floor(config.shutdown.timeoutMs / 3),
      );
      await running.worker?.close();
      routerStop.abort();
      clearTimeout(routing);
      await running.coordinator?.close();
      running.journal?.close();
      await running.scheduler?.close();
      await running.partitions?.close();
      await running.routerClient?.close();
      await gateways.close();
      await running.evaluator?.close();
      await depth.close();
      await mongo.close().catch(() => undefined);
      await health?.close();
    },
    start,
  };
}

/** The broker user of the first URL (amqplib's default when none is given): whom parts are published as. */
function brokerUser(urls: Readonly<Config['amqp']['url']>): string {
  const [first] = parseBrokerAddresses(urls);
  const user = first === undefined ? '' : decodeURIComponent(new URL(first.url).username);
  return user === '' ? 'guest' : user;
}

async function ping(db: ReturnType<MongoClient['db']>): Promise<boolean> {
  try {
    await db.command({ ping: 1 });
    return true;
  } catch {
    return false;
  }
}

function gatewayAllowlist(setting: readonly string[]): ReturnType<typeof parseAddressAllowlist> {
  try {
    return parseAddressAllowlist(setting);
  } catch (error) {
    throw new ConfigError(
      `invalid configuration: delivery.gatewayIpAllowlist (PUSH_GATEWAY_IP_ALLOWLIST): ${(error as Error).message}`,
    );
  }
}
