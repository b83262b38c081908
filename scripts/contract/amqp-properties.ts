// The AMQP 0-9-1 properties each kind of message uses, as contract/asyncapi.yaml
// states them (`x-amqp-properties` of each message). Names are the AMQP
// spec's with `_` for `-`: pika and aio-pika take them as they are
// (`reply_to`), lapin as `with_reply_to`, amqplib in camelCase (`replyTo`).
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../../src/contract/wire-version.js';

export interface AmqpProperty {
  readonly name: string;
  readonly use: 'required' | 'optional' | 'set by the worker' | 'do not set' | 'ignored';
  readonly value: string;
}

const header = (use: AmqpProperty['use'], value: string): AmqpProperty => ({
  name: `headers.${WIRE_VERSION_HEADER}`,
  use,
  value,
});

const contentType = (use: AmqpProperty['use']): AmqpProperty => ({
  name: 'content_type',
  use,
  value: '`application/json`; the body is read as UTF-8 JSON whatever it says.',
});

const VERSION_ON_REQUEST = `integer (${WIRE_VERSION} today): the wire version the caller speaks; absent means 1. A worker that speaks an older version answers Unrecognized and changes nothing.`;

/** A request on the request, read or evaluate queue. */
export const REQUEST_PROPERTIES: readonly AmqpProperty[] = [
  {
    name: 'reply_to',
    use: 'required',
    value:
      'where the reply goes, through the default exchange: `amq.rabbitmq.reply-to` (direct reply-to: consume it with no-ack on the same channel before publishing) or a queue of the caller. Without it the request is dead-lettered unanswered.',
  },
  {
    name: 'correlation_id',
    use: 'required',
    value:
      'text, unique per request: the reply carries it. Without it the request is dead-lettered. A request may be answered twice (a worker lost between reply and ack): take the first reply.',
  },
  {
    name: 'message_id',
    use: 'optional',
    value:
      "a write's idempotency key: a write whose id is among the user's last `writes.recordedWritesWindow` (100) applied ones gets the recorded reply and is not applied again. One fresh id per intended write (a UUID), the same when retrying it. Ignored on reads and evaluate.",
  },
  {
    name: 'user_id',
    use: 'optional',
    value:
      'the broker user of the connection (RabbitMQ refuses any other): required when the workers have trusted publishers (`amqp.trustedPublishers`), Forbidden if absent or not listed; homeserver ops need it.',
  },
  contentType('optional'),
  {
    name: 'expiration',
    use: 'optional',
    value:
      'milliseconds, as a decimal string (an AMQP shortstr): with `timestamp`, the caller’s deadline. RabbitMQ drops the request once expired in the queue; a worker drops one past it unanswered, and answers one taken before it by then (Unavailable if the store was too slow).',
  },
  {
    name: 'timestamp',
    use: 'optional',
    value:
      'when the request was sent: seconds since the epoch (AMQP), or milliseconds (values above 10^11 are read as ms). Without it a worker sets no deadline of its own.',
  },
  {
    name: 'delivery_mode',
    use: 'optional',
    value: '1 (transient) is enough: a request lost with a broker node gets no reply, and the caller sends it again.',
  },
  header('optional', VERSION_ON_REQUEST),
  {
    name: 'mandatory (publish flag)',
    use: 'optional',
    value:
      'recommended: a request no queue takes (no worker ever declared it) comes back as basic.return instead of being dropped.',
  },
];

/** A `notify` on the delivery queue. */
export const NOTIFY_PROPERTIES: readonly AmqpProperty[] = [
  {
    name: 'reply_to',
    use: 'optional',
    value:
      'with `correlation_id`, to be answered `{"recipients", "devices"}` once every part is secured (or after `delivery.replyWaitMs` with `pending`); without: fire and forget (publish with confirms and wait for the broker’s ack).',
  },
  {
    name: 'correlation_id',
    use: 'optional',
    value: 'with `reply_to`: the reply carries it. Without `message_id`, it also names the message.',
  },
  {
    name: 'message_id',
    use: 'optional',
    value:
      'the idempotency key, for `delivery.acceptedRetentionSeconds` (7 days) after the intake: the same id again (a retry after a lost confirm, a redelivery) schedules nothing more and is answered with the first answer. One id per message, stable across its own retries, not per event: when one event’s recipients are split over several messages, each needs its own (the event ID and the batch’s index, or a UUID kept with the pending message); so does each badge update. Without it the message is named by the SHA-256 of its body with its `timestamp` and `correlation_id` (a redelivery keeps them, a new publish changes them); with neither, by its body and the `delivery.derivedIdWindowSeconds` (5 min) window it is routed in: the same bytes again within that window are not sent.',
  },
  {
    name: 'timestamp',
    use: 'optional',
    value:
      'when the notify was published: seconds since the epoch (AMQP), or milliseconds (values above 10^11). A notification still waiting `delivery.maxAgeMs` (1 h) after it is dropped unsent (`expired`); a value ahead of the worker’s clock counts as now, and without it the age counts from when the router took the message. Keep the homeserver’s clock synchronized (NTP).',
  },
  {
    name: 'user_id',
    use: 'required',
    value: 'a trusted publisher (`amqp.trustedPublishers`); anything else is refused.',
  },
  contentType('optional'),
  {
    name: 'delivery_mode',
    use: 'required',
    value: '2 (persistent): a confirmed notify must live through a broker restart.',
  },
  {
    name: 'expiration',
    use: 'do not set',
    value:
      'the worker serves a notify however old it is, but RabbitMQ (3.10 and later) drops an expired message from a quorum queue unserved.',
  },
  header('optional', VERSION_ON_REQUEST),
  { name: 'mandatory (publish flag)', use: 'optional', value: 'recommended, with publisher confirms.' },
];

/** A reply, published by a worker to the request's `reply_to`. */
export const REPLY_PROPERTIES: readonly AmqpProperty[] = [
  { name: 'correlation_id', use: 'set by the worker', value: "the request's." },
  { name: 'content_type', use: 'set by the worker', value: '`application/json`.' },
  header(
    'set by the worker',
    `integer: the worker's wire version (${WIRE_VERSION} today). Absent: a worker that predates the header (version 1).`,
  ),
];

/** A change event, published by a worker on the events exchange. */
export const CHANGE_EVENT_PROPERTIES: readonly AmqpProperty[] = [
  { name: 'routing key', use: 'set by the worker', value: 'the event’s `type`: `m.push_rules` or `m.pushers`.' },
  { name: 'content_type', use: 'set by the worker', value: '`application/json`.' },
  { name: 'delivery_mode', use: 'set by the worker', value: '2 (persistent).' },
  header('set by the worker', "integer: the worker's wire version."),
];
