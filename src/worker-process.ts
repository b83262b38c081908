import { setFlagsFromString } from 'node:v8';
import { MongoClient } from 'mongodb';
import type { Config } from './config/config-schema.js';
import { workerRolesOf } from './config/load-config.js';
import type { WorkerRoles } from './config/worker-roles.js';
import type { ServiceProcess } from './lifecycle/run-process.js';
import type { Logger } from './logging/logger.js';
import { BrokerQueueProbe } from './observability/broker-queue-probe.js';
import { HealthServer } from './observability/health-server.js';
import { WorkerMetrics } from './observability/metrics.js';
import { registerReadCacheMetrics } from './observability/cache-metrics.js';
import { QueueDepthMetrics } from './observability/queue-depth-metrics.js';
import type { Command } from './service/command.js';
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
import { DeliveryHost } from './delivery-thread/delivery-host.js';
import { gatewayAllowlistOf } from './delivery-thread/gateway-allowlist-of.js';
import { mergedMetrics } from './observability/merged-metrics.js';

/** Only the tests set them: run around serving each parsed request of the request and read queues, and the delivery thread's script. */
export interface ServeHooks {
  readonly beforeServe?: (command: Command) => void;
  readonly afterServe?: (command: Command) => void;
  /** A delivery thread that can be made to fail (src/delivery-thread/delivery-thread.ts when absent). */
  readonly deliveryThread?: URL;
}

/**
 * One worker process, wired from its configuration: the store, the
 * services, the queues, metrics and health. It builds, consumes, measures
 * and drains only what its roles need (`worker.roles`;
 * docs/operations.md#running-by-role). `npm start` runs it through
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
  const roles = workerRolesOf(config);
  // A function, not the property: signals flip it between awaits.
  const stopped = () => stop.signal.aborted;
  // Created once the database answers; signals and probes may come sooner.
  const running: {
    worker?: RpcWorker;
    evaluator?: Evaluator;
  } = {};
  // The request path: the queues the main thread serves. Delivery runs on a thread of its own.
  const serves = roles.rpc || roles.read || roles.evaluate;

  // Reads are served by the request queue (`rpc`) and the read queue (`read`).
  const readCache =
    config.reads.cacheMaxEntries > 0 && (roles.rpc || roles.read)
      ? new RulesetCache<LoadedPushRules>({
          maxEntries: config.reads.cacheMaxEntries,
          maxBytes: config.reads.cacheMaxBytes,
          maxStalenessMs: config.reads.maxStalenessMs,
        })
      : undefined;
  const queues = queuesOf(config, roles);
  const metrics = new WorkerMetrics(() => running.worker?.inFlight ?? 0, {
    // The compiled rulesets of `evaluate`, on the event loop and in the threads, kept current by the change events.
    ...(roles.evaluate
      ? { cache: summedCacheView(() => (running.evaluator === undefined ? [] : [running.evaluator.cache])) }
      : {}),
    queues: { all: Object.keys(queues), consumed: () => running.worker?.consumedQueues ?? [] },
    roles,
  });
  if (readCache !== undefined) registerReadCacheMetrics(metrics.registry, readCache);
  // Checked here, before anything starts: a mistyped address range stops the worker at start, not at the first push.
  if (roles.deliver) gatewayAllowlistOf(config.delivery);
  // Delivery on a thread of its own (its connections, store client, metrics registry), whatever the other roles:
  // its CPU never queues behind or in front of the requests served here, nor the probes and scrapes.
  const delivery = roles.deliver
    ? new DeliveryHost({
        config,
        logger: log,
        ...(hooks.deliveryThread === undefined ? {} : { threadUrl: hooks.deliveryThread }),
      })
    : undefined;
  // Its own broker connection, opened at the first scrape. Every queue of the pool, whatever this worker's
  // roles: a queue no worker serves shows its backlog too.
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
        probes: {
          // A deliver-only worker consumes the `notify` queue alone, in its thread.
          consuming: () => (serves ? (running.worker?.consuming ?? false) : (delivery?.consuming ?? false)),
          database: async () => ping(db),
          ...(delivery === undefined ? {} : { delivery: () => delivery.ready }),
        },
        metrics: async () => {
          if (delivery === undefined)
            return { contentType: metrics.registry.contentType, body: await metrics.registry.metrics() };
          const merged = mergedMetrics(await Promise.all([metrics.registry.getMetricsAsJSON(), delivery.metrics()]));
          return { contentType: merged.contentType, body: await merged.metrics() };
        },
      })
    : undefined;

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
    // Its threads, each with a store connection and a cache, only on a worker that evaluates.
    const evaluator = roles.evaluate
      ? new Evaluator({
          evaluate: config.evaluate,
          mongodb: config.mongodb,
          maxJsonDepth: config.limits.maxJsonDepth,
          store,
          logger: log,
          observer: metrics,
        })
      : undefined;
    if (evaluator !== undefined) running.evaluator = evaluator;
    // Started before the request path, as before it had a thread: a worker whose partition count the pool
    // does not share does not start at all.
    await delivery?.start(stop.signal);
    if (stopped() || !serves) {
      if (!stopped()) log.info({ database: config.mongodb.database, roles: config.worker.roles }, 'worker started');
      return;
    }
    const worker = new RpcWorker(service, {
      amqp: config.amqp,
      userOps: [...(roles.rpc ? (['request'] as const) : []), ...(roles.read ? (['read'] as const) : [])],
      queues:
        evaluator === undefined
          ? []
          : [evaluateQueue({ amqp: config.amqp, evaluate: config.evaluate, run: evaluator.run, observer: metrics })],
      // The caches of push rules; delivery's thread hears the pushers' events on its own session.
      changes: {
        pushRulesChanged: (userId) => {
          readCache?.invalidate(userId);
          evaluator?.invalidate(userId);
        },
        subscriptionReset: () => {
          readCache?.clear();
          evaluator?.clear();
        },
      },
      limits: config.limits,
      logger: log,
      observer: metrics,
      ...(hooks.beforeServe === undefined ? {} : { beforeServe: hooks.beforeServe }),
      ...(hooks.afterServe === undefined ? {} : { afterServe: hooks.afterServe }),
    });
    running.worker = worker;
    await worker.start();
    if (!stopped()) log.info({ database: config.mongodb.database, roles: config.worker.roles }, 'worker started');
  };

  return {
    health,
    healthHost: config.health.host,
    inFlight: () => running.worker?.inFlight ?? 0,
    close: async () => {
      // The request path and delivery close side by side: they share no connection any more. Delivery closes in
      // its thread as it did here (routing, then the partitions handed over, then its connections).
      await Promise.all([running.worker?.close(), delivery?.close()]);
      await running.evaluator?.close();
      await depth.close();
      await mongo.close().catch(() => undefined);
      await health?.close();
    },
    start,
  };
}

/** The queues a worker with `roles` consumes, by the role metrics label them with (`request` for `rpc`). */
function queuesOf(config: Readonly<Config>, roles: WorkerRoles): Record<string, string> {
  return {
    ...(roles.rpc ? { request: config.amqp.queue } : {}),
    ...(roles.read ? { read: config.amqp.readQueue } : {}),
    ...(roles.evaluate ? { evaluate: config.evaluate.queue } : {}),
    ...(roles.deliver ? { deliver: config.delivery.queue } : {}),
  };
}

async function ping(db: ReturnType<MongoClient['db']>): Promise<boolean> {
  try {
    await db.command({ ping: 1 });
    return true;
  } catch {
    return false;
  }
}
