// contract/asyncapi.yaml: every queue and exchange of the pool, who
// declares it and with which arguments (recorded from the workers' own
// declarations: declared-topology.ts), the AMQP properties of each message
// (amqp-properties.ts) and every message, its payload referencing the
// JSON Schemas of contract/schemas/ (json-schemas.ts).
import type { Config } from '../../src/config/config-schema.js';
import { ENVIRONMENT } from '../../src/config/worker-environment.js';
import { isReadOp, OPS } from '../../src/contract/ops.js';
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../../src/contract/wire-version.js';
import { partitionQueue } from '../../src/consumer/notify-queue.js';
import { partitionName } from '../../src/delivery/partitions.js';
import {
  CHANGE_EVENT_PROPERTIES,
  NOTIFY_PROPERTIES,
  REPLY_PROPERTIES,
  REQUEST_PROPERTIES,
  type AmqpProperty,
} from './amqp-properties.js';
import type { Declared, DeclaredExchange, DeclaredQueue } from './declared-topology.js';

type Json = Record<string, unknown>;

const SCHEMA_FORMAT = 'application/schema+json;version=draft-07';

const DESCRIPTION = `How a homeserver, in any language, talks to the matrix-push-worker pool over RabbitMQ (AMQP 0-9-1).
The application described is the worker pool: it *receives* requests and *sends* replies and change events.

- Callers publish to the **default exchange** (\`""\`) with the queue's name as routing key, and declare nothing:
  every worker declares every queue and exchange below, at start and on each reconnect, with the arguments
  stated (\`x-declaration\`). A caller that declares one anyway must use exactly those arguments: a queue or
  exchange declared first with others (pika's \`queue_declare(name, durable=True)\`, an exchange with
  \`durable=False\`) makes every worker's declaration fail with 406 PRECONDITION_FAILED, so no worker serves;
  declared after the workers with other arguments, it closes the caller's own channel with that error.
  To learn whether a queue exists and is served, a caller may declare it *passively* and read its consumer count.
- Message bodies are UTF-8 JSON, validated by the JSON Schemas of \`schemas/\` (2020-12; also valid draft-07,
  as referenced here). Objects are open: a field not named is ignored, and a caller ignores reply fields it
  does not know.
- AMQP properties are named as the AMQP spec names them, \`-\` written \`_\` (pika: \`reply_to\`; lapin:
  \`with_reply_to\`; amqplib: \`replyTo\`); each message lists those it uses (\`x-amqp-properties\`).
- Wire version ${WIRE_VERSION}: header \`${WIRE_VERSION_HEADER}\` (integer) on requests (absent: 1), replies and
  change events. It grows with every change of these files a caller could notice. A worker serves every version
  from 1 to its own, and refuses a newer one with \`Unrecognized\`, nothing changed; a reply without the header
  comes from a worker that predates it (version 1). Upgrade every worker before a caller starts sending a newer
  version. See docs/rpc-contract.md#wire-version.

Names and arguments are the defaults (config/default.json); each channel says which setting renames it.`;

/** The setting and variable that rename a queue or exchange, by its default name. */
function settingOf(config: Config, name: string): string {
  const sections = { amqp: config.amqp, evaluate: config.evaluate, delivery: config.delivery } as const;
  for (const [section, values] of Object.entries(sections)) {
    for (const [key, value] of Object.entries(values)) {
      if (value !== name) continue;
      const variable = ENVIRONMENT.find((v) => v.path.join('.') === `${section}.${key}`)?.name;
      return `\`${section}.${key}\`${variable === undefined ? '' : ` (${variable})`}`;
    }
  }
  return 'not configurable';
}

function declaration(declared: readonly Declared[], name: string): Json {
  const found = declared.find((d): d is DeclaredQueue | DeclaredExchange => d.kind !== 'binding' && d.name === name);
  if (found === undefined) throw new Error(`no worker declares ${name}`);
  return found.kind === 'queue'
    ? { declaredBy: 'every worker', queue: { durable: found.durable, arguments: found.arguments } }
    : { declaredBy: 'every worker', exchange: { type: found.type, durable: found.durable } };
}

const queueBinding = (name: string) => ({
  amqp: {
    is: 'queue',
    queue: { name, durable: true, exclusive: false, autoDelete: false, vhost: '/' },
    bindingVersion: '0.3.0',
  },
});

const exchangeBinding = (name: string, type: string) => ({
  amqp: {
    is: 'routingKey',
    exchange: { name, type, durable: true, autoDelete: false, vhost: '/' },
    bindingVersion: '0.3.0',
  },
});

const camel = (name: string) => name.replace(/_(.)/g, (_match, letter: string) => letter.toUpperCase());

const WIRE_HEADERS = {
  type: 'object',
  properties: {
    [WIRE_VERSION_HEADER]: { type: 'integer', minimum: 1, description: 'The wire version (see info.description).' },
  },
};

const CORRELATION = { location: '$message.header#/correlation_id', description: 'The AMQP property correlation_id.' };

/** What the messages of one kind share: content type, correlation, headers, AMQP properties. */
const trait = (amqp: readonly AmqpProperty[], correlated = true) => ({
  contentType: 'application/json',
  ...(correlated ? { correlationId: CORRELATION } : {}),
  headers: WIRE_HEADERS,
  'x-amqp-properties': amqp.map((p) => ({ ...p })),
});

const traitRef = (name: string) => [{ $ref: `#/components/messageTraits/${name}` }];

const request = (name: string, def: string, title: string, traitName: string) => ({
  name,
  title,
  payload: { schemaFormat: SCHEMA_FORMAT, schema: { $ref: `./schemas/request.schema.json#/$defs/${def}` } },
  bindings: { amqp: { messageType: def, bindingVersion: '0.3.0' } },
  traits: traitRef(traitName),
});

const reply = (op: string) => ({
  name: `${op} reply`,
  title: `The reply to ${op}`,
  payload: {
    schemaFormat: SCHEMA_FORMAT,
    schema: {
      allOf: [
        { $ref: './schemas/reply.schema.json' },
        {
          if: { properties: { ok: { const: true } } },
          then: { properties: { body: { $ref: `./schemas/ops/${op}.reply.schema.json` } } },
        },
      ],
    },
  },
  traits: traitRef('reply'),
});

const refs = (channel: string, names: readonly string[]) =>
  names.map((name) => ({ $ref: `#/channels/${channel}/messages/${name}` }));

const messageRefs = (names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/messages/${name}` }]));

/** The document, from the settings and what the workers declare with them. */
export function asyncApiDocument(config: Config, declared: readonly Declared[]): Json {
  const { amqp, evaluate, delivery } = config;
  const userOps = OPS.map((op) => `${camel(op)}Request`);
  const readOps = OPS.filter(isReadOp).map((op) => `${camel(op)}Request`);
  const replyOps = [...OPS, 'evaluate', 'notify'];
  const replies = replyOps.map((op) => `${camel(op)}Reply`);
  const partitions = Array.from({ length: delivery.partitions }, (_, p) => partitionName(p));
  const serve = (channel: string, messages: readonly string[], replyMessages: readonly string[], summary: string) => ({
    action: 'receive',
    summary,
    channel: { $ref: `#/channels/${channel}` },
    messages: refs(channel, messages),
    reply: {
      address: {
        location: '$message.header#/reply_to',
        description: "The request's reply_to, through the default exchange.",
      },
      channel: { $ref: '#/channels/reply' },
      messages: refs('reply', replyMessages),
    },
  });
  const queueChannel = (name: string, description: string, messages: readonly string[]) => ({
    address: name,
    title: name,
    description: `${description} Renamed by ${settingOf(config, name)}.`,
    messages: messageRefs(messages),
    bindings: queueBinding(name),
    'x-declaration': declaration(declared, name),
  });
  return {
    asyncapi: '3.0.0',
    info: { title: 'matrix-push-worker RPC contract', version: String(WIRE_VERSION), description: DESCRIPTION },
    defaultContentType: 'application/json',
    servers: {
      broker: {
        host: '127.0.0.1:5672',
        protocol: 'amqp',
        protocolVersion: '0.9.1',
        description: 'Any node of the RabbitMQ cluster the workers use.',
      },
    },
    channels: {
      request: queueChannel(
        amqp.queue,
        'Every push-rule and pusher op (not evaluate, not notify): the only queue a caller needs for them. Quorum: a request lives through the loss of a node.',
        userOps,
      ),
      read: queueChannel(
        amqp.readQueue,
        'The read-only ops alone, served as on the request queue (any other op is Unrecognized). Classic. Send reads here only while it has a consumer (a passive declare says so) and publish mandatory; a read the broker returns goes to the request queue, which serves every op. A caller may send every read to the request queue instead.',
        readOps,
      ),
      evaluate: queueChannel(evaluate.queue, 'evaluate alone, single or batch form. Classic by default.', [
        'evaluateRequest',
        'evaluateBatchRequest',
      ]),
      deliver: queueChannel(
        delivery.queue,
        'notify alone: pushes to deliver. Single active consumer: one worker at a time takes the messages in publish order and routes each to the partition queues of its recipients.',
        ['notifyRequest'],
      ),
      deliverPartition: {
        address: `${delivery.queue}.{partition}`,
        title: `${delivery.queue}.p000 … ${delivery.queue}.${partitions.at(-1) ?? ''}`,
        description: `Worker-internal: the parts of each notify, one queue per partition (\`delivery.partitions\`, ${delivery.partitions}), consumed by the worker holding the partition. Callers never publish here.`,
        parameters: { partition: { enum: partitions, description: 'The partition, as p000, p001, …' } },
        messages: messageRefs(['notifyPart']),
        'x-declaration': declaration(declared, partitionQueue(delivery, 0)),
      },
      deadLetterExchange: {
        address: amqp.deadLetterExchange,
        title: amqp.deadLetterExchange,
        description: `Where every queue above dead-letters what it cannot serve: requests without reply_to or correlation_id, requests redelivered past the delivery limit, refused notify messages. Renamed by ${settingOf(config, amqp.deadLetterExchange)}.`,
        bindings: exchangeBinding(amqp.deadLetterExchange, 'fanout'),
        'x-declaration': declaration(declared, amqp.deadLetterExchange),
      },
      deadLetterQueue: {
        address: amqp.deadLetterQueue,
        title: amqp.deadLetterQueue,
        description: `Bound to the dead-letter exchange: kept for an operator; nothing serves it. Renamed by ${settingOf(config, amqp.deadLetterQueue)}.`,
        bindings: queueBinding(amqp.deadLetterQueue),
        'x-declaration': declaration(declared, amqp.deadLetterQueue),
      },
      accountData: {
        address: amqp.eventsExchange,
        title: amqp.eventsExchange,
        description: `A durable topic exchange: a change event after each write that changed something, routing key = its type (m.push_rules, m.pushers), at least once. To follow them, bind a queue of your own (exclusive, server-named) with those routing keys. Renamed by ${settingOf(config, amqp.eventsExchange)}.`,
        messages: messageRefs(['changeEvent']),
        bindings: exchangeBinding(amqp.eventsExchange, 'topic'),
        'x-declaration': declaration(declared, amqp.eventsExchange),
      },
      reply: {
        address: null,
        title: 'reply_to',
        description:
          "The request's reply_to (amq.rabbitmq.reply-to, direct reply-to, or a queue of the caller), through the default exchange.",
        messages: messageRefs(replies),
      },
    },
    operations: {
      serveRequest: serve(
        'request',
        userOps,
        OPS.map((op) => `${camel(op)}Reply`),
        'A worker serves a request and replies.',
      ),
      serveRead: serve(
        'read',
        readOps,
        OPS.filter(isReadOp).map((op) => `${camel(op)}Reply`),
        'A worker serves a read and replies.',
      ),
      serveEvaluate: serve(
        'evaluate',
        ['evaluateRequest', 'evaluateBatchRequest'],
        ['evaluateReply'],
        'A worker evaluates and replies.',
      ),
      takeNotify: {
        ...serve(
          'deliver',
          ['notifyRequest'],
          ['notifyReply'],
          'A worker takes a notify in; replies only when it has reply_to and correlation_id.',
        ),
      },
      takeNotifyPart: {
        action: 'receive',
        summary: 'Worker-internal: the holder of a partition takes its parts in.',
        channel: { $ref: '#/channels/deliverPartition' },
        messages: refs('deliverPartition', ['notifyPart']),
      },
      announceChange: {
        action: 'send',
        summary: 'A worker announces a write, confirmed by the broker before the write is answered.',
        channel: { $ref: '#/channels/accountData' },
        messages: refs('accountData', ['changeEvent']),
      },
    },
    components: {
      messageTraits: {
        request: trait(REQUEST_PROPERTIES),
        notify: trait(NOTIFY_PROPERTIES),
        reply: trait(REPLY_PROPERTIES),
        changeEvent: trait(CHANGE_EVENT_PROPERTIES, false),
      },
      messages: {
        ...Object.fromEntries(
          OPS.map((op) => [`${camel(op)}Request`, request(op, op, `The ${op} request`, 'request')]),
        ),
        evaluateRequest: request('evaluate', 'evaluate_single', 'evaluate, single form', 'request'),
        evaluateBatchRequest: request('evaluate (batch)', 'evaluate_batch', 'evaluate, batch form (events)', 'request'),
        notifyRequest: request(
          'notify',
          'notify',
          'notify: one event (or a badge change) to push to its recipients',
          'notify',
        ),
        notifyPart: {
          name: 'notify part',
          title: "A notify's recipients of one partition, with message_id `<notify's id>/<partition>`",
          contentType: 'application/json',
          payload: { schemaFormat: SCHEMA_FORMAT, schema: { $ref: './schemas/request.schema.json#/$defs/notify' } },
        },
        ...Object.fromEntries(replyOps.map((op) => [`${camel(op)}Reply`, reply(op)])),
        changeEvent: {
          name: 'change event',
          title: "A user's push rules or pushers changed",
          payload: { schemaFormat: SCHEMA_FORMAT, schema: { $ref: './schemas/change-event.schema.json' } },
          traits: traitRef('changeEvent'),
        },
      },
    },
  };
}
