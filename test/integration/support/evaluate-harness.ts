import amqp from 'amqplib';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, inject } from 'vitest';
import type { Config } from '../../../src/config/config-schema.js';
import { createLogger } from '../../../src/logging/logger.js';
import { capturingLogger } from '../../support/capturing-logger.js';
import { evaluateQueue } from '../../../src/consumer/evaluate-queue.js';
import type { EvaluatedOnObserver } from '../../../src/consumer/split-evaluate-runner.js';
import { Evaluator } from '../../../src/evaluate-threads/evaluator.js';
import type { StoreBoundsObserver } from '../../../src/service/bounded-store.js';
import { RpcWorker } from '../../../src/consumer/rpc-worker.js';
import { MongoPushStore } from '../../../src/store/mongo-push-store.js';
import type { PushStore } from '../../../src/store/push-store.js';
import { PushService } from '../../../src/service/push-service.js';
import { DEFAULT_CONFIG } from '../../support/default-config.js';
import { deleteTopology, TEST_LIMITS, uniqueNames, type Names } from './worker-harness.js';
import { RpcCaller } from './rpc-caller.js';

export interface EvaluatingWorker {
  readonly names: Names;
  readonly evaluateQueueName: string;
  readonly worker: RpcWorker;
  close(): Promise<void>;
}

export interface EvaluatingWorkerOptions {
  /** The database (shared by the workers of one test). */
  readonly db: Db;
  readonly evaluate?: Partial<Config['evaluate']>;
  /** Another worker's names: share its events exchange (and so its change events). */
  readonly eventsExchange?: string;
  /** Wraps the store, e.g. to count its calls. */
  readonly wrapStore?: (store: PushStore) => PushStore;
  readonly trustedPublishers?: readonly string[];
  /** Evaluation threads (the real evaluate-thread.ts, on the same database); 0 or absent: on the event loop. */
  readonly threads?: number;
  /** Hears where each request was evaluated, and the store operations given up. */
  readonly observer?: StoreBoundsObserver & EvaluatedOnObserver;
}

/** One in-process worker consuming a request queue and an evaluate queue of its own. */
export async function startEvaluatingWorker(options: EvaluatingWorkerOptions): Promise<EvaluatingWorker> {
  const unique = uniqueNames();
  const names: Names = {
    ...unique,
    amqp: {
      ...unique.amqp,
      ...(options.eventsExchange === undefined ? {} : { eventsExchange: options.eventsExchange }),
      trustedPublishers: [...(options.trustedPublishers ?? [])],
    },
  };
  const evaluateSettings: Config['evaluate'] = {
    ...DEFAULT_CONFIG.evaluate,
    queue: `${names.queue}.evaluate`,
    ...options.evaluate,
  };
  const mongoStore = new MongoPushStore(options.db, {
    accountDataCollection: 'account_data',
    pushersCollection: 'pushers',
  });
  const lines: string[] = [];
  await within(mongoStore.ensureIndexes(), STARTED_WITHIN_MS, 'creating the indexes', lines);
  const store = options.wrapStore?.(mongoStore) ?? mongoStore;
  const service = new PushService(store, {
    maxWriteAttempts: 12,
    backoff: { baseMs: 2, maxMs: 100 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: TEST_LIMITS,
  });
  // Kept, not printed: a worker that does not start says why in the test's failure.
  const level = process.env['TEST_LOG_LEVEL'];
  const logger = level === undefined ? capturingLogger(lines, 'info', 50) : createLogger(level);
  const threads = options.threads ?? 0;
  if (threads > 0 && options.wrapStore !== undefined) throw new Error('a thread reads its own store: no wrapStore');
  // Wired as the worker process wires it: small requests on the event loop (unless `evaluate.inline*` is 0), the rest in the threads.
  const evaluator = new Evaluator({
    evaluate: { ...evaluateSettings, threads },
    mongodb: { ...DEFAULT_CONFIG.mongodb, url: inject('mongoUrl'), database: options.db.databaseName },
    maxJsonDepth: TEST_LIMITS.maxJsonDepth,
    store,
    logger,
    ...(options.observer === undefined ? {} : { observer: options.observer }),
  });
  const worker = new RpcWorker(service, {
    amqp: names.amqp,
    limits: TEST_LIMITS,
    logger,
    queues: [
      evaluateQueue({
        amqp: names.amqp,
        evaluate: evaluateSettings,
        run: evaluator.run,
      }),
    ],
    changes: {
      pushRulesChanged: (userId) => {
        evaluator.invalidate(userId);
      },
      subscriptionReset: () => {
        evaluator.clear();
      },
    },
  });
  try {
    await within(worker.start(), STARTED_WITHIN_MS, 'starting the worker (connecting, declaring, consuming)', lines);
  } catch (error) {
    await worker.close();
    await evaluator.close();
    throw error;
  }
  return {
    names,
    evaluateQueueName: evaluateSettings.queue,
    worker,
    close: async () => {
      await worker.close();
      await evaluator.close();
      await deleteTopology(names).catch(() => undefined);
      await deleteQueue(names.amqp.url, evaluateSettings.queue);
    },
  };
}

/** Well within the hooks' timeout: a worker that does not start fails saying where it stopped, not by a timeout. */
const STARTED_WITHIN_MS = 50_000;

/** `work`, or after `ms` an error naming `what` and the worker's last log lines. */
async function within(work: Promise<unknown>, ms: number, what: string, lines: readonly string[]): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => {
      resolve('late');
    }, ms);
  });
  try {
    if ((await Promise.race([work, late])) !== 'late') return;
  } finally {
    clearTimeout(timer);
  }
  throw new Error(`${what}: not done within ${String(ms)} ms; the worker's last log lines:\n${lines.join('\n')}`);
}

/** A database of the test's own, dropped on close. */
export async function openTestDatabase(): Promise<{ db: Db; close: () => Promise<void> }> {
  const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  await mongo.connect();
  const db = mongo.db(uniqueNames().database);
  return {
    db,
    close: async () => {
      await db.dropDatabase();
      await mongo.close();
    },
  };
}

async function deleteQueue(url: string, queue: string): Promise<void> {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  await channel.deleteQueue(queue);
  await connection.close();
}

/** What a file of evaluate tests shares: a database of its own, a caller, and the workers its tests started. */
export interface EvaluateWorld {
  readonly db: Db;
  readonly caller: RpcCaller;
  /** Closed after the file's tests. */
  readonly workers: EvaluatingWorker[];
}

/** Opens the world before the file's tests and closes it, workers first, after them. Call at the top level. */
export function useEvaluateWorld(): EvaluateWorld {
  const opened: { database?: { db: Db; close: () => Promise<void> }; caller?: RpcCaller } = {};
  const workers: EvaluatingWorker[] = [];
  beforeAll(async () => {
    opened.database = await openTestDatabase();
    opened.caller = await RpcCaller.open(inject('amqpUrl'));
  });
  afterAll(async () => {
    await opened.caller?.close();
    await Promise.all(workers.map(async (w) => w.close()));
    await opened.database?.close();
  });
  const required = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the evaluate world's ${what} is used before beforeAll opened it`);
    return value;
  };
  return {
    get db() {
      return required(opened.database, 'database').db;
    },
    get caller() {
      return required(opened.caller, 'caller');
    },
    workers,
  };
}
