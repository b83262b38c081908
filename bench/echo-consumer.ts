/**
 * The broker baseline's consumer: the worker's topology, prefetch and
 * TCP_NODELAY, and a reply of `{"ok":true,"body":{}}` to every request,
 * acknowledged after the reply as the worker does. No parsing, no store:
 * what is left is the broker and amqplib, the limit the worker runs under.
 *
 * Configured like the worker (`loadConfig`: AMQP_URL, RPC_QUEUE, ...);
 * prints `ready` once it consumes.
 */
import amqp from 'amqplib';
import { loadConfig } from '../src/config/load-config.js';
import { declareTopology } from '../src/consumer/amqp-topology.js';
import { firstBrokerUrl } from '../src/amqp/broker-addresses.js';

const REPLY = Buffer.from('{"ok":true,"body":{}}');

const config = loadConfig();
const connection = await amqp.connect(firstBrokerUrl(config.amqp.url), { noDelay: true });
const channel = await connection.createChannel();
await declareTopology(channel, config.amqp);
await channel.prefetch(config.amqp.prefetch);
await channel.consume(config.amqp.queue, (message) => {
  if (message === null) return;
  const { replyTo, correlationId } = message.properties as { replyTo?: string; correlationId?: string };
  if (replyTo !== undefined) {
    channel.publish('', replyTo, REPLY, {
      ...(correlationId === undefined ? {} : { correlationId }),
      contentType: 'application/json',
    });
  }
  channel.ack(message);
});
process.on('SIGTERM', () => {
  void connection.close().finally(() => process.exit(0));
});
console.log('ready');
