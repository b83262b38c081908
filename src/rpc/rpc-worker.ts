import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import type { Logger } from '../logging/logger.js';
import type { HandleOutcome, PushService } from '../worker/push-service.js';
import { failure, type Reply } from '../worker/reply.js';
import { declareTopology } from './amqp-topology.js';
import { parseRequest } from './parse-request.js';
import { requestDeadline } from './request-deadline.js';

export interface RpcWorkerOptions {
  readonly amqp: Config['amqp'];
  readonly maxRequestBytes: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

const JSON_CONTENT = 'application/json';

/**
 * Consumes the request queue, hands each request to the service, publishes
 * exactly one reply and then acknowledges. Lifecycle: `start()`, then
 * `close()`, which stops consuming, lets every request in flight finish and
 * reply, and closes the connection. `close()` is idempotent.
 */
export class RpcWorker {
  readonly #service: PushService;
  readonly #options: RpcWorkerOptions;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #inFlight = new Set<Promise<void>>();
  #connection: ChannelModel | undefined;
  #channel: Channel | undefined;
  #consumerTag: string | undefined;
  #closing: Promise<void> | undefined;

  constructor(service: PushService, options: RpcWorkerOptions) {
    this.#service = service;
    this.#options = options;
    this.#log = options.logger;
    this.#now = options.now ?? Date.now;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  async start(): Promise<void> {
    const { amqp: settings } = this.#options;
    // Nagle's algorithm holds back a lone small frame (a reply, an ack)
    // waiting for the peer's delayed ACK: ~40 ms per round trip without this.
    const connection = await amqp.connect(settings.url, { noDelay: true });
    this.#connection = connection;
    connection.on('error', (error: Error) => {
      this.#log.error({ err: error }, 'AMQP connection error');
    });
    const channel = await connection.createChannel();
    this.#channel = channel;
    channel.on('error', (error: Error) => {
      this.#log.error({ err: error }, 'AMQP channel error');
    });
    await declareTopology(channel, settings);
    await channel.prefetch(settings.prefetch);
    const { consumerTag } = await channel.consume(settings.queue, (message) => {
      if (message === null) {
        this.#log.warn({ queue: settings.queue }, 'consumer cancelled by the broker');
        return;
      }
      this.#track(this.#onMessage(channel, message));
    });
    this.#consumerTag = consumerTag;
    this.#log.info({ queue: settings.queue, prefetch: settings.prefetch }, 'consuming requests');
  }

  /** Stops consuming, waits for in-flight requests to be answered, disconnects. */
  async close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    const channel = this.#channel;
    if (channel !== undefined && this.#consumerTag !== undefined) {
      await channel.cancel(this.#consumerTag).catch((error: unknown) => {
        this.#log.warn({ err: error }, 'could not cancel the consumer');
      });
    }
    await Promise.allSettled([...this.#inFlight]);
    await channel?.close().catch(() => undefined);
    await this.#connection?.close().catch(() => undefined);
    this.#log.info('worker closed');
  }

  #track(work: Promise<void>): void {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
  }

  async #onMessage(channel: Channel, message: ConsumeMessage): Promise<void> {
    // amqplib types these properties as `any`; they are whatever the publisher sent.
    const properties = message.properties;
    const replyTo: unknown = properties.replyTo;
    const correlationId: unknown = properties.correlationId;
    const timestamp: unknown = properties.timestamp;
    const expiration: unknown = properties.expiration;
    if (typeof replyTo !== 'string' || replyTo === '' || typeof correlationId !== 'string' || correlationId === '') {
      this.#log.warn(
        { messageId: properties.messageId as unknown, hasReplyTo: typeof replyTo === 'string', hasCorrelationId: typeof correlationId === 'string' },
        'request without replyTo or correlationId cannot be answered: dead-lettered',
      );
      this.#settle(channel, message, 'reject');
      return;
    }
    const deadline = requestDeadline(timestamp, expiration);
    if (deadline !== undefined && deadline <= this.#now()) {
      this.#log.info({ correlationId }, 'request expired before it was taken: dropped');
      this.#settle(channel, message, 'ack');
      return;
    }

    const started = performance.now();
    const messageId: unknown = properties.messageId;
    const outcome = await this.#serve(message.content, typeof messageId === 'string' && messageId !== '' ? messageId : undefined);
    const published = this.#publish(channel, '', replyTo, outcome.reply, { correlationId, contentType: JSON_CONTENT });
    if (published && outcome.change !== undefined) {
      this.#publish(channel, this.#options.amqp.eventsExchange, outcome.change.type, outcome.change, { contentType: JSON_CONTENT });
    }
    this.#settle(channel, message, published ? 'ack' : 'requeue');
    this.#logOutcome(outcome, correlationId, performance.now() - started, message.fields.redelivered);
  }

  async #serve(body: Buffer, messageId: string | undefined): Promise<HandleOutcome & { op?: string }> {
    const parsed = parseRequest(body, { maxBytes: this.#options.maxRequestBytes });
    if (!parsed.ok) return { reply: failure(parsed.error), conflicts: 0 };
    try {
      return { ...(await this.#service.handle(parsed.value, { messageId })), op: parsed.value.op };
    } catch (error) {
      // The service turns every failure into a reply; this is a bug, and
      // the caller still gets an answer.
      return { reply: failure(matrixError('Database', MESSAGES.internalError)), conflicts: 0, failure: error, op: parsed.value.op };
    }
  }

  #publish(channel: Channel, exchange: string, routingKey: string, body: Reply | object, options: amqp.Options.Publish): boolean {
    try {
      channel.publish(exchange, routingKey, Buffer.from(JSON.stringify(body)), options);
      return true;
    } catch (error) {
      this.#log.error({ err: error, exchange, routingKey: exchange === '' ? 'reply' : routingKey }, 'publish failed');
      return false;
    }
  }

  #settle(channel: Channel, message: ConsumeMessage, how: 'ack' | 'reject' | 'requeue'): void {
    try {
      if (how === 'ack') channel.ack(message);
      else channel.nack(message, false, how === 'requeue');
    } catch (error) {
      // The channel is gone: the broker redelivers the request elsewhere.
      this.#log.warn({ err: error }, 'could not settle a request; the broker will redeliver it');
    }
  }

  #logOutcome(outcome: HandleOutcome & { op?: string }, correlationId: string, ms: number, redelivered: boolean): void {
    const fields = {
      op: outcome.op,
      correlationId,
      ms: Math.round(ms * 100) / 100,
      conflicts: outcome.conflicts,
      redelivered,
      ...(outcome.replayed === true ? { replayed: true } : {}),
      outcome: outcome.reply.ok ? 'ok' : outcome.reply.error.kind,
    };
    if (outcome.failure !== undefined) this.#log.error({ ...fields, err: outcome.failure }, 'request failed unexpectedly');
    else if (!outcome.reply.ok && outcome.reply.error.status >= 500) this.#log.warn(fields, 'request not served');
    else if (!outcome.reply.ok) this.#log.info(fields, 'request refused');
    else this.#log.debug(fields, 'request served');
  }
}
