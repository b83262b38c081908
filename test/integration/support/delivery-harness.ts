import amqp from 'amqplib';
import { MongoClient, type Db } from 'mongodb';
import { inject } from 'vitest';
import { PushRulesClient } from '../../../src/client/push-rules-client.js';
import type { Config } from '../../../src/config/config-schema.js';
import type { WorkerRole } from '../../../src/config/worker-roles.js';
import { createLogger } from '../../../src/logging/logger.js';
import type { ServiceProcess } from '../../../src/lifecycle/run-process.js';
import { createWorkerProcess, type ServeHooks } from '../../../src/worker-process.js';
import { partitionQueue } from '../../../src/consumer/notify-queue.js';
import { capturingLogger } from '../../support/capturing-logger.js';
import { DEFAULT_CONFIG } from '../../support/default-config.js';
import { deleteTopology, uniqueNames, type Names } from './worker-harness.js';

/** The broker user the tests connect as: the one a trusted publisher must be. */
export function brokerUser(): string {
  const user = new URL(inject('amqpUrl')).username;
  return user === '' ? 'guest' : decodeURIComponent(user);
}

export interface DeliveringWorker {
  readonly names: Names;
  readonly config: Readonly<Config>;
  readonly db: Db;
  /** Every log line the worker wrote (at debug level and above), as written. */
  readonly logs: string[];
  /** A client of the worker's queues, as a trusted homeserver (unless the worker trusts someone else). */
  readonly client: PushRulesClient;
  /** Stops the worker (as a shutdown does); the queues and database stay for a next worker. */
  stop(): Promise<void>;
  /** The first worker started. */
  readonly first: StartedWorker;
  /** Starts another worker process on the same queues and database; of `roles` only when given. */
  startAnother(roles?: readonly WorkerRole[]): Promise<StartedWorker>;
  /** Stops the oldest worker still running (as a shutdown does). */
  stopOne(): Promise<void>;
  close(): Promise<void>;
}

/** One worker of the harness. */
export interface StartedWorker {
  readonly process: ServiceProcess;
  /** Its `/readyz` and `/metrics`, on a free port of 127.0.0.1: only for a worker started with roles. */
  readonly healthUrl: string | undefined;
}

export interface DeliveringWorkerOptions {
  /** The first worker's roles (`worker.roles`); all of them when absent. */
  readonly roles?: readonly WorkerRole[];
  readonly delivery?: Partial<Config['delivery']>;
  readonly trustedPublishers?: readonly string[];
  /** The first worker's test hooks (a delivery thread that can be made to fail). */
  readonly hooks?: ServeHooks;
}

/**
 * A whole worker in this process, wired exactly as `npm start` wires it
 * (`createWorkerProcess`), on queues and a database of the test's own.
 * Gateways on 127.0.0.1 are allowed (`PUSH_GATEWAY_IP_ALLOWLIST`), and
 * pushers may name `http://` gateways: the push gateway double serves
 * plain HTTP here (HTTPS is the gateway client's own tests' and the fault
 * tests').
 */
export async function startDeliveringWorker(options: DeliveringWorkerOptions = {}): Promise<DeliveringWorker> {
  const names = uniqueNames();
  const config: Config = {
    ...DEFAULT_CONFIG,
    amqp: { ...names.amqp, trustedPublishers: [...(options.trustedPublishers ?? [brokerUser()])] },
    mongodb: { ...DEFAULT_CONFIG.mongodb, url: inject('mongoUrl'), database: names.database },
    evaluate: { ...DEFAULT_CONFIG.evaluate, queue: `${names.queue}.evaluate` },
    delivery: {
      ...DEFAULT_CONFIG.delivery,
      queue: `${names.queue}.deliver`,
      gatewayIpAllowlist: ['127.0.0.1/32'],
      leaseMs: 3000,
      partitions: 4,
      // A `notify` with a reply is answered once secured: while a gateway fails, after this.
      persistAfterMs: 250,
      retryBaseMs: 200,
      retryMaxMs: 1000,
      ...options.delivery,
    },
    pushers: { allowInsecureGateways: true },
    health: { ...DEFAULT_CONFIG.health, enabled: false },
    log: { level: process.env['TEST_LOG_LEVEL'] ?? 'silent' },
  };
  const logs: string[] = [];
  const log = process.env['TEST_LOG_LEVEL'] === undefined ? capturingLogger(logs) : createLogger(config.log.level);
  const processes: { stop: AbortController; process: ServiceProcess }[] = [];
  const startAnother = async (roles?: readonly WorkerRole[], hooks: ServeHooks = {}): Promise<StartedWorker> => {
    const stop = new AbortController();
    // A worker of some roles only answers its own probes, to tell it from the others.
    const own: Config =
      roles === undefined
        ? config
        : { ...config, worker: { roles: [...roles] }, health: { enabled: true, host: '127.0.0.1', port: 0 } };
    const process = createWorkerProcess(own, log, stop, hooks);
    processes.push({ stop, process });
    const port = await process.health?.listen();
    await process.start();
    return { process, healthUrl: port === undefined ? undefined : `http://127.0.0.1:${String(port)}` };
  };
  const first = await startAnother(options.roles, options.hooks);
  const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  await mongo.connect();
  const client = new PushRulesClient({
    url: names.amqp.url,
    queue: names.amqp.queue,
    readQueue: names.amqp.readQueue,
    evaluateQueue: config.evaluate.queue,
    deliverQueue: config.delivery.queue,
    publisherUserId: brokerUser(),
    // Generous: the test stand-in stalls for seconds when the machine is busy.
    timeoutMs: 30_000,
  });
  const stopAll = async () => {
    for (const entry of processes.splice(0)) {
      entry.stop.abort();
      await entry.process.close();
    }
  };
  return {
    names,
    config,
    db: mongo.db(names.database),
    logs,
    client,
    stop: stopAll,
    first,
    startAnother,
    stopOne: async () => {
      const oldest = processes.shift();
      if (oldest === undefined) return;
      oldest.stop.abort();
      await oldest.process.close();
    },
    close: async () => {
      await client.close();
      await stopAll();
      await mongo.db(names.database).dropDatabase();
      await mongo.close();
      await deleteTopology(names).catch(() => undefined);
      await deleteQueues(names.amqp.url, [
        config.evaluate.queue,
        config.delivery.queue,
        ...Array.from({ length: config.delivery.partitions }, (_, p) => partitionQueue(config.delivery, p)),
      ]);
    },
  };
}

/** Messages dead-lettered so far (taken off the dead-letter queue). */
export async function takeDeadLetters(names: Names): Promise<Record<string, unknown>[]> {
  const connection = await amqp.connect(names.amqp.url);
  try {
    const channel = await connection.createChannel();
    const taken: Record<string, unknown>[] = [];
    for (;;) {
      const message = await channel.get(names.amqp.deadLetterQueue, { noAck: true });
      if (message === false) return taken;
      taken.push(JSON.parse(message.content.toString('utf8')) as Record<string, unknown>);
    }
  } finally {
    await connection.close();
  }
}

/** Change events of one type, as a front listening on the events exchange sees them. */
export async function listenForChanges(names: Names, type: 'm.pushers' | 'm.push_rules') {
  const connection = await amqp.connect(names.amqp.url);
  const channel = await connection.createChannel();
  await channel.assertExchange(names.amqp.eventsExchange, 'topic', { durable: true });
  const { queue } = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(queue, names.amqp.eventsExchange, type);
  const events: Record<string, unknown>[] = [];
  await channel.consume(
    queue,
    (message) => {
      if (message !== null) events.push(JSON.parse(message.content.toString('utf8')) as Record<string, unknown>);
    },
    { noAck: true },
  );
  return {
    events,
    close: async () => {
      await connection.close();
    },
  };
}

async function deleteQueues(url: string, queues: readonly string[]): Promise<void> {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  for (const queue of queues) await channel.deleteQueue(queue).catch(() => undefined);
  await connection.close().catch(() => undefined);
}
