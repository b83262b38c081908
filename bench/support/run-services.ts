/**
 * The broker and store of `npm run bench`, and the run's own names on them:
 * its queues and database, a worker's environment on them, and their
 * deletion afterwards.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { loadConfig } from '../../src/config/load-config.js';
import { partitionQueue } from '../../src/consumer/notify-queue.js';

export const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';
export const MONGODB_URL = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
export const id = randomUUID().slice(0, 8);
export const names = {
  queue: `bench.push.rpc.${id}`,
  echoQueue: `bench.echo.${id}`,
  classicEchoQueue: `bench.echo.classic.${id}`,
  database: `bench_push_${id}`,
};
/** The read queue of the benchmark's workers (and of its client). */
export const readQueueOf = (queue: string) => `${queue}.read`;
const evaluateQueueOf = (queue: string) => `${queue}.evaluate`;
/** The workers' defaults, for what the baselines copy of them. */
export const DEFAULTS = loadConfig();

/**
 * A worker (or echo consumer) configured like production but on the
 * benchmark's own queues and database: its request, read and evaluate
 * queues, never the shared defaults (`matrix.push.read` may have other
 * consumers on this broker).
 */
export function childEnv(queue: string, database = names.database): NodeJS.ProcessEnv {
  return {
    ...process.env,
    AMQP_URL,
    MONGODB_URL,
    MONGODB_DATABASE: database,
    RPC_QUEUE: queue,
    RPC_READ_QUEUE: readQueueOf(queue),
    RPC_DEAD_LETTER_EXCHANGE: `${queue}.dlx`,
    RPC_DEAD_LETTER_QUEUE: `${queue}.dead`,
    EVENTS_EXCHANGE: `${queue}.events`,
    // Its own evaluate queue too: the default one may exist, declared with another dead-letter exchange.
    EVALUATE_QUEUE: evaluateQueueOf(queue),
    // And its own delivery queue: the shared default is declared with another dead-letter exchange.
    DELIVERY_QUEUE: `${queue}.deliver`,
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
  };
}

export async function deleteQueues(queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  await channel.deleteQueue(queue);
  await channel.deleteQueue(readQueueOf(queue));
  await channel.deleteQueue(evaluateQueueOf(queue));
  await channel.deleteQueue(`${queue}.deliver`);
  // The delivery queue's partition queues (as many as the workers were configured with).
  const partitions = DEFAULTS.delivery.partitions;
  for (let partition = 0; partition < partitions; partition += 1)
    await channel.deleteQueue(partitionQueue({ queue: `${queue}.deliver` }, partition));
  await channel.deleteQueue(`${queue}.dead`);
  await channel.deleteExchange(`${queue}.dlx`);
  await channel.deleteExchange(`${queue}.events`);
  await connection.close();
}
