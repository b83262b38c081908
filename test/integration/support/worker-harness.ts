import { partitionQueue } from '../../../src/consumer/notify-queue.js';
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { MongoClient, type Db } from 'mongodb';
import { inject } from 'vitest';
import type { Config } from '../../../src/config/config-schema.js';
import { createLogger } from '../../../src/logging/logger.js';
import { RpcWorker, type RpcWorkerOptions } from '../../../src/consumer/rpc-worker.js';
import { MongoPushStore } from '../../../src/store/mongo-push-store.js';
import { PushService } from '../../../src/service/push-service.js';
import { DEFAULT_CONFIG } from '../../support/default-config.js';
import { RpcCaller, type ContractReply } from './rpc-caller.js';

export interface Names {
  readonly queue: string;
  /** One broker node in these tests: `url` is that node's URL. */
  readonly amqp: TestAmqp;
  readonly database: string;
}

/** The worker's AMQP settings, on the one node the tests use. */
export type TestAmqp = Omit<Config['amqp'], 'url'> & { readonly url: string };

/** Queue, exchange and database names of one test file's own. */
export function uniqueNames(): Names {
  const id = randomUUID().slice(0, 8);
  const queue = `test.push.rpc.${id}`;
  return {
    queue,
    database: `test_push_${id}`,
    amqp: {
      ...DEFAULT_CONFIG.amqp,
      url: inject('amqpUrl'),
      queue,
      readQueue: `${queue}.read`,
      deadLetterExchange: `${queue}.dlx`,
      deadLetterQueue: `${queue}.dead`,
      eventsExchange: `${queue}.events`,
    },
  };
}

export interface Harness {
  readonly names: Names;
  readonly db: Db;
  readonly caller: RpcCaller;
  readonly worker: RpcWorker;
  /** Sends `{op, user_id, ...fields}` and returns the reply. */
  call(op: string, userId: string, fields?: Record<string, unknown>): Promise<ContractReply>;
  close(): Promise<void>;
}

export const MAX_REQUEST_BYTES = 16 * 1024;
/** Small enough that tests reach each limit with a few requests. */
export const TEST_LIMITS = {
  ...DEFAULT_CONFIG.limits,
  maxRequestBytes: MAX_REQUEST_BYTES,
  maxStringBytes: 2048,
  maxActionsPerRule: 8,
  maxConditionsPerRule: 8,
  maxUserRules: 12,
  maxRulesetBytes: 64 * 1024,
  maxPushersPerUser: 3,
};

/** What a test may put into the worker besides its settings: hooks, an observer, its own logger. */
export type WorkerOverrides = Partial<Pick<RpcWorkerOptions, 'logger' | 'observer' | 'beforeServe' | 'afterServe'>>;

/** One in-process worker on the real broker and database server. */
export async function startHarness(
  amqpOverrides: Partial<TestAmqp> = {},
  workerOverrides: WorkerOverrides = {},
): Promise<Harness> {
  const unique = uniqueNames();
  const names = { ...unique, amqp: { ...unique.amqp, ...amqpOverrides } };
  const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  await mongo.connect();
  const db = mongo.db(names.database);
  const store = new MongoPushStore(db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' });
  await store.ensureIndexes();
  const service = new PushService(store, {
    maxWriteAttempts: 12,
    backoff: { baseMs: 2, maxMs: 100 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: TEST_LIMITS,
  });
  const worker = new RpcWorker(service, {
    amqp: names.amqp,
    limits: TEST_LIMITS,
    logger: createLogger(process.env['TEST_LOG_LEVEL'] ?? 'silent'),
    ...workerOverrides,
  });
  await worker.start();
  const caller = await RpcCaller.open(names.amqp.url);
  return {
    names,
    db,
    caller,
    worker,
    call: async (op, userId, fields = {}) => caller.call(names.queue, { op, user_id: userId, ...fields }),
    close: async () => {
      await caller.close();
      await worker.close();
      await deleteTopology(names);
      await db.dropDatabase();
      await mongo.close();
    },
  };
}

export async function deleteTopology(names: Names): Promise<void> {
  const connection = await amqp.connect(names.amqp.url);
  const channel = await connection.createChannel();
  await channel.deleteQueue(names.amqp.queue);
  await channel.deleteQueue(names.amqp.readQueue);
  // Declared by worker processes (see worker-processes.ts); deleting a queue that is not there is fine.
  await channel.deleteQueue(`${names.amqp.queue}.evaluate`);
  await channel.deleteQueue(`${names.amqp.queue}.deliver`);
  // And its partition queues, however many the worker was configured with (up to the default): each is a
  // quorum queue, and a broker left with thousands of them runs out of file descriptors.
  for (let partition = 0; partition < DEFAULT_CONFIG.delivery.partitions; partition += 1)
    await channel.deleteQueue(partitionQueue({ queue: `${names.amqp.queue}.deliver` }, partition));
  await channel.deleteQueue(names.amqp.deadLetterQueue);
  await channel.deleteExchange(names.amqp.deadLetterExchange);
  await channel.deleteExchange(names.amqp.eventsExchange);
  await connection.close();
}
