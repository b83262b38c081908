import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';
import { inject } from 'vitest';
import type { Config } from '../../../src/config/config-schema.js';
import { partitionQueue } from '../../../src/consumer/notify-queue.js';
import { createLogger } from '../../../src/logging/logger.js';
import { DEFAULT_RULES_REVISION } from '../../../src/push-rules/server-default-rules.js';
import { createWorkerProcess } from '../../../src/worker-process.js';
import { DEFAULT_CONFIG } from '../../support/default-config.js';
import { PushGatewayDouble } from '../../support/push-gateway-double.js';
import { brokerUser } from './delivery-harness.js';

/**
 * The pool the conformance cases run against: a whole worker, wired as
 * `npm start` wires it, on the queues every client uses by default (an
 * adapter reads only AMQP_URL and PUBLISHER_USER_ID), a database of its
 * own, and a push gateway double. Its settings are the defaults but for
 * what the cases' format names (contract/schemas/conformance-case.schema.json):
 * the adapters' broker user is a trusted publisher, and pushers may name
 * the double, plain HTTP on 127.0.0.1; and for delivery's pace (fewer
 * partitions, claimed and secured sooner), which no reply shows.
 */
export interface ConformanceWorkers {
  readonly amqpUrl: string;
  /** The broker user the adapters publish as: trusted by the workers. */
  readonly publisher: string;
  /** `{{gateway}}`: the double's notify URL. */
  readonly gatewayUrl: string;
  /** A store step: the user's push-rules event content, stored as this text. */
  storePushRules(userId: string, contentJson: string): Promise<void>;
  close(): Promise<void>;
}

/** The default topology: the clients' queues and what the workers declare beside them. */
function defaultQueues(config: Readonly<Config>): string[] {
  return [
    config.amqp.queue,
    config.amqp.readQueue,
    config.amqp.deadLetterQueue,
    config.evaluate.queue,
    config.delivery.queue,
    ...Array.from({ length: DEFAULT_CONFIG.delivery.partitions }, (_, p) => partitionQueue(config.delivery, p)),
  ];
}

/**
 * Deletes the default queues (what an earlier run left in them goes too),
 * refusing to when anything consumes one: another pool on them would take
 * the adapters' requests.
 */
async function clearDefaultQueues(url: string, config: Readonly<Config>, exchanges: boolean): Promise<void> {
  const connection = await amqp.connect(url);
  try {
    for (const queue of defaultQueues(config)) {
      const channel = await connection.createChannel();
      // A queue that is not there closes the channel (an error event, answered here): nothing to clear.
      channel.on('error', () => undefined);
      const found = await channel.checkQueue(queue).catch(() => undefined);
      if (found !== undefined && found.consumerCount > 0)
        throw new Error(
          `${queue} has ${found.consumerCount} consumer(s) already: the conformance run needs the default queues to itself (its adapters use the clients' defaults); stop whatever consumes them`,
        );
      if (found !== undefined) await channel.deleteQueue(queue);
      await channel.close().catch(() => undefined);
    }
    if (exchanges) {
      const channel = await connection.createChannel();
      await channel.deleteExchange(config.amqp.deadLetterExchange);
      await channel.deleteExchange(config.amqp.eventsExchange);
      await channel.close();
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export async function startConformanceWorkers(): Promise<ConformanceWorkers> {
  const amqpUrl = inject('amqpUrl');
  const publisher = brokerUser();
  const gateway = await PushGatewayDouble.start();
  const database = `test_conformance_${randomUUID().slice(0, 8)}`;
  const config: Config = {
    ...DEFAULT_CONFIG,
    amqp: { ...DEFAULT_CONFIG.amqp, url: amqpUrl, trustedPublishers: [publisher] },
    mongodb: { ...DEFAULT_CONFIG.mongodb, url: inject('mongoUrl'), database },
    delivery: {
      ...DEFAULT_CONFIG.delivery,
      gatewayIpAllowlist: ['127.0.0.1/32'],
      // Few partition queues (each a quorum queue), claimed soon; a reply once secured, soon.
      partitions: 4,
      leaseMs: 3000,
      persistAfterMs: 250,
    },
    pushers: { allowInsecureGateways: true },
    health: { ...DEFAULT_CONFIG.health, enabled: false },
    log: { level: process.env['TEST_LOG_LEVEL'] ?? 'silent' },
  };
  await clearDefaultQueues(amqpUrl, config, false);
  const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  await mongo.connect();
  const stop = new AbortController();
  const worker = createWorkerProcess(config, createLogger(config.log.level), stop);
  try {
    await worker.start();
  } catch (error) {
    await Promise.allSettled([worker.close(), gateway.close(), mongo.close()]);
    throw error;
  }
  const db = mongo.db(database);
  return {
    amqpUrl,
    publisher,
    gatewayUrl: gateway.notifyUrl,
    storePushRules: async (userId, contentJson) => {
      // The store's document for a user with push rules (docs/storage.md), at the current defaults.
      await db.collection(config.mongodb.accountDataCollection).insertOne({
        _id: userId as never,
        version: 1,
        push_rules: { content_json: contentJson, defaults_revision: DEFAULT_RULES_REVISION },
      });
    },
    close: async () => {
      stop.abort();
      await worker.close();
      await gateway.close();
      await db.dropDatabase();
      await mongo.close();
      await clearDefaultQueues(amqpUrl, config, true);
    },
  };
}
