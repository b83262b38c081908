import type { Channel, ConfirmChannel, ConsumeMessage, Options } from 'amqplib';
import type { Config } from '../config/config-schema.js';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import type { Logger } from '../logging/logger.js';
import { failureOutcome } from '../service/failure-reply.js';
import type { ChangeEvent } from '../service/push-service.js';
import { encodeReply, encodeReplyBytes, failure, type Reply } from '../contract/reply.js';
import { requestedWireVersion, WIRE_VERSION_HEADERS } from '../contract/wire-version.js';
import type { ChangeListener } from './change-listener.js';
import type { ServeContext, ServeOutcome } from './consumed-queue.js';
import type { Lane } from './lane.js';
import { publishedAtMs } from './publish-time.js';
import { requestDeadline, stopWorkBy } from './request-deadline.js';
import type { RequestReport, WorkerObserver } from './worker-observer.js';

export interface RequestEnvelopeOptions {
  readonly amqp: Pick<Config['amqp'], 'trustedPublishers' | 'replyMarginMs' | 'eventsExchange' | 'connectTimeoutMs'>;
  readonly logger: Logger;
  readonly observer: WorkerObserver;
  /** This worker's own listener of change events (the evaluate cache), told of its own writes at once. */
  readonly changes?: ChangeListener | undefined;
  readonly now: () => number;
}

/** One request as it came off a lane, with the session's channel for change events. */
export interface Delivery {
  readonly lane: Lane;
  readonly message: ConsumeMessage;
  /** Change events go out here, confirmed by the broker before the request is acknowledged. */
  readonly confirms: ConfirmChannel;
  /** Resolves once the change events on this worker's event queue now are applied (`ChangeSubscription`). */
  readonly changesApplied?: () => Promise<void>;
}

const JSON_CONTENT = 'application/json';

/** How far the handling of one request got, so that a failure neither answers nor settles it twice. */
interface Progress {
  replied: boolean;
  settled: boolean;
}

/**
 * Everything around a request's body, the same for every queue: the reply
 * address and correlation, the deadline (an expired request is dropped),
 * the publisher's trust, exactly one reply, the change events confirmed
 * before the acknowledgement, the settlement, the log line and the metrics.
 * What the body means is the queue's business (`ConsumedQueue.serve`).
 */
export class RequestEnvelope {
  readonly #options: RequestEnvelopeOptions;
  readonly #log: Logger;

  constructor(options: RequestEnvelopeOptions) {
    this.#options = options;
    this.#log = options.logger;
  }

  /**
   * Never rejects: its promise is only tracked, so a rejection would be
   * unhandled and take the process down, and the broker would hand the same
   * request to the next worker. Anything unexpected is logged with its
   * cause; a request not answered yet gets an internal error and is acked.
   */
  async handle(delivery: Delivery): Promise<void> {
    const { lane, message } = delivery;
    const progress: Progress = { replied: false, settled: false };
    try {
      await this.#answer(delivery, progress);
    } catch (error) {
      try {
        this.#log.error({ err: error, ...progress }, 'request failed unexpectedly');
        const { replyTo, correlationId } = message.properties as { replyTo?: unknown; correlationId?: unknown };
        if (
          !progress.replied &&
          typeof replyTo === 'string' &&
          replyTo !== '' &&
          typeof correlationId === 'string' &&
          correlationId !== ''
        ) {
          this.#publish(lane.channel, '', replyTo, failureOutcome(error).reply, {
            correlationId,
            contentType: JSON_CONTENT,
            headers: WIRE_VERSION_HEADERS,
          });
        }
        if (!progress.settled) this.#settle(lane, message, 'ack');
      } catch {
        // Logging itself failed; the request is settled or goes back to the broker with the channel.
      }
    }
  }

  async #answer(delivery: Delivery, progress: Progress): Promise<void> {
    const { lane, message, confirms } = delivery;
    const { channel } = lane;
    const started = performance.now();
    // amqplib types these properties as `any`; they are whatever the publisher sent.
    const properties = message.properties;
    const replyTo: unknown = properties.replyTo;
    const correlationId: unknown = properties.correlationId;
    const messageId: unknown = properties.messageId;
    const publisher: unknown = properties.userId;
    const redelivered = message.fields.redelivered;
    const report = (op: string, outcome: string, extra: Partial<RequestReport> = {}) => {
      this.#options.observer.requestSettled({
        op,
        queue: lane.consumed.role,
        outcome,
        seconds: (performance.now() - started) / 1000,
        conflicts: 0,
        redelivered,
        replayed: false,
        unchanged: false,
        deadlinePassed: false,
        ...extra,
      });
    };
    const answerable =
      typeof replyTo === 'string' && replyTo !== '' && typeof correlationId === 'string' && correlationId !== '';
    if (!answerable && lane.consumed.replyOptional !== true) {
      this.#log.warn(
        { messageId, hasReplyTo: typeof replyTo === 'string', hasCorrelationId: typeof correlationId === 'string' },
        'request without replyTo or correlationId cannot be answered: dead-lettered',
      );
      progress.settled = true;
      this.#settle(lane, message, 'reject');
      report('unknown', 'dead-lettered');
      return;
    }
    const timed = lane.consumed.ignoresDeadline !== true;
    const deadline = timed
      ? requestDeadline(properties.timestamp as unknown, properties.expiration as unknown)
      : undefined;
    if (deadline !== undefined && deadline <= this.#options.now()) {
      this.#log.info({ correlationId }, 'request expired before it was taken: dropped');
      progress.settled = true;
      this.#settle(lane, message, 'ack');
      report('unknown', 'expired');
      return;
    }

    const { trustedPublishers, replyMarginMs } = this.#options.amqp;
    const context: ServeContext = {
      ...(delivery.changesApplied === undefined ? {} : { changesApplied: delivery.changesApplied }),
      messageId: typeof messageId === 'string' && messageId !== '' ? messageId : undefined,
      publishedAt: publishedAtMs(properties.timestamp as unknown),
      correlationId: typeof correlationId === 'string' && correlationId !== '' ? correlationId : undefined,
      answered: answerable,
      deadline: timed
        ? stopWorkBy(properties.timestamp as unknown, properties.expiration as unknown, replyMarginMs)
        : undefined,
    };
    // A caller newer than this worker is refused before its body is read: it may mean what this worker cannot.
    const wire = requestedWireVersion(properties.headers);
    const outcome: ServeOutcome =
      trustedPublishers.length > 0 && (typeof publisher !== 'string' || !trustedPublishers.includes(publisher))
        ? { reply: failure(matrixError('Forbidden', MESSAGES.untrustedPublisher)), conflicts: 0 }
        : !wire.ok
          ? { reply: failure(matrixError('Unrecognized', wire.message)), conflicts: 0 }
          : await lane.consumed.serve(message.content, context);
    if (outcome.requeue === true) {
      progress.settled = true;
      this.#settle(lane, message, 'requeue');
      this.#log.info({ op: outcome.op, correlationId, messageId }, 'request not served (stopping): back to the queue');
      return;
    }
    const changes = outcome.changes ?? [];
    // This worker's own cache learns of its own writes at once, not a round trip later.
    for (const change of changes) {
      if (change.type === 'm.push_rules') this.#options.changes?.pushRulesChanged?.(change.user_id);
      else this.#options.changes?.pushersChanged?.(change.user_id);
    }
    // A change event wakes the users' /sync streams and drops the user from
    // every worker's caches. The reply waits until the broker has confirmed
    // every event (routed to every queue bound, replicas included), so a
    // caller that has the reply of a write reads it back from any worker:
    // the event is on that worker's event queue before the reply leaves,
    // and a read answered from a cache waits until that queue is applied
    // up to it (`ServeContext.changesApplied`).
    // Unconfirmed, the request goes back to the queue unanswered, and its
    // redelivery announces the change again and replies.
    const announced = await this.announce(confirms, changes);
    // The reply needs no confirm: it goes out on the channel the ack takes
    // after it, so a broker that has the ack has the reply.
    const replied =
      announced &&
      (answerable
        ? this.#publish(channel, '', replyTo, outcome.reply, {
            correlationId,
            contentType: JSON_CONTENT,
            headers: WIRE_VERSION_HEADERS,
          })
        : true);
    progress.replied = replied;
    progress.settled = true;
    const refused = !outcome.reply.ok && lane.consumed.deadLetterRefusals === true;
    this.#settle(lane, message, !replied ? 'requeue' : refused ? 'reject' : 'ack');
    const seconds = (performance.now() - started) / 1000;
    this.#logOutcome(outcome, { correlationId, publisher, redelivered, ms: Math.round(seconds * 100_000) / 100 });
    report(outcome.op ?? 'unknown', outcome.reply.ok ? 'ok' : outcome.reply.error.kind, {
      conflicts: outcome.conflicts,
      replayed: outcome.replayed === true,
      unchanged: outcome.unchanged === true,
      deadlinePassed: outcome.deadlinePassed === true,
    });
  }

  #publish(
    channel: Channel,
    exchange: string,
    routingKey: string,
    body: Reply | object,
    options: Options.Publish,
  ): boolean {
    try {
      channel.publish(exchange, routingKey, encodeReplyBytes(body), options);
      return true;
    } catch (error) {
      this.#log.error({ err: error, exchange, routingKey: exchange === '' ? 'reply' : routingKey }, 'publish failed');
      return false;
    }
  }

  /** Publishes the change events with publisher confirms; false when any was not confirmed. */
  async announce(confirms: ConfirmChannel, changes: readonly ChangeEvent[]): Promise<boolean> {
    if (changes.length === 0) return true;
    const { eventsExchange: exchange, connectTimeoutMs: waitMs } = this.#options.amqp;
    // A broker that blocks the connection (a memory or disk alarm) stops
    // reading it, so no confirm comes and no heartbeat fails: past this
    // wait the request goes back to the queue instead of holding a
    // shutdown or a lost session's retirement for as long as the alarm.
    const confirmed = await Promise.all(
      changes.map(
        async (change) =>
          new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => {
              this.#log.warn(
                { user: change.user_id, type: change.type, waitMs },
                'no confirm of a change event in time; the request goes back to the queue',
              );
              resolve(false);
            }, waitMs);
            const done = (ok: boolean) => {
              clearTimeout(timer);
              resolve(ok);
            };
            try {
              confirms.publish(
                exchange,
                change.type,
                Buffer.from(encodeReply(change)),
                { contentType: JSON_CONTENT, persistent: true, headers: WIRE_VERSION_HEADERS },
                (error) => {
                  if (error !== null && error !== undefined)
                    this.#log.warn(
                      { err: error, user: change.user_id, type: change.type },
                      'the broker did not confirm a change event',
                    );
                  done(error === null || error === undefined);
                },
              );
            } catch (error) {
              this.#log.error({ err: error, exchange, routingKey: change.type }, 'publish failed');
              done(false);
            }
          }),
      ),
    );
    return confirmed.every(Boolean);
  }

  /** Acks go through the lane's batcher (sent by the next event-loop turn); nacks at once. */
  #settle(lane: Lane, message: ConsumeMessage, how: 'ack' | 'reject' | 'requeue'): void {
    const tag = message.fields.deliveryTag;
    if (how === 'ack') {
      lane.acks.answered(tag);
      return;
    }
    lane.acks.settledElsewhere(tag);
    try {
      lane.channel.nack(message, false, how === 'requeue');
    } catch (error) {
      // The channel is gone: the broker redelivers the request elsewhere.
      this.#log.warn({ err: error }, 'could not settle a request; the broker will redeliver it');
    }
  }

  #logOutcome(outcome: ServeOutcome, context: Record<string, unknown>): void {
    // A request served is logged at debug: off in production, so skip building its line.
    if (
      outcome.reply.ok &&
      outcome.failure === undefined &&
      outcome.cause === undefined &&
      !this.#log.isLevelEnabled('debug')
    )
      return;
    const fields = {
      op: outcome.op,
      ...context,
      conflicts: outcome.conflicts,
      ...(outcome.replayed === true ? { replayed: true } : {}),
      ...(outcome.unchanged === true ? { unchanged: true } : {}),
      ...(outcome.deadlinePassed === true ? { deadlinePassed: true } : {}),
      ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
      outcome: outcome.reply.ok ? 'ok' : outcome.reply.error.kind,
    };
    if (outcome.failure !== undefined)
      this.#log.error({ ...fields, err: outcome.failure }, 'request failed unexpectedly');
    else if (!outcome.reply.ok && outcome.reply.error.status >= 500) this.#log.warn(fields, 'request not served');
    else if (!outcome.reply.ok) this.#log.info(fields, 'request refused');
    // A success with a cause: a batch of `evaluate` whose events the store did not serve were answered Unavailable each.
    else if (outcome.cause !== undefined) this.#log.warn(fields, 'request served in part');
    else this.#log.debug(fields, 'request served');
  }
}
