import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../../src/contract/wire-version.js';
import { changeEventProblems, evaluateEntryProblems, replyProblems, requestProblems } from './contract-validator.js';

/**
 * Holds every message a test process sends and receives over AMQP to
 * contract/schemas/, whoever sends it (RpcClient, PushRulesClient, the
 * tests' RpcCaller, a worker in the process): amqplib's publish and the
 * consumers of direct reply-to are wrapped once, and what breaks the
 * contract is written down for the test to fail on (`takeContractProblems`).
 *
 * - A request (a body with an `op`) is checked against request.schema.json
 *   and remembered by `correlation_id`. Tests send bad bodies on purpose,
 *   so a refused request is no problem in itself; a success answered to
 *   it is (the schema refused what a worker served). In evaluate's batch
 *   form, each entry the schema refuses must get an error of its own.
 * - A reply is checked against reply.schema.json and its op's success
 *   body. Only replies carrying the wire-version header are a worker's (a
 *   worker sets it on every reply: test/consumer/request-envelope-wire-
 *   version.test.ts); the others are test doubles' and are not checked.
 * - A change event (routing key `m.push_rules`/`m.pushers` on an
 *   exchange) must fit change-event.schema.json and carry the header.
 */

interface Sent {
  readonly op: string;
  readonly body: Record<string, unknown>;
  readonly valid: boolean;
}

interface Publishable {
  publish: (
    this: Publishable,
    exchange: string,
    routingKey: string,
    content: Buffer,
    options?: PublishOptions,
    ...rest: unknown[]
  ) => boolean;
  consume: (
    this: Publishable,
    queue: string,
    callback: (message: Received | null) => void,
    ...rest: unknown[]
  ) => Promise<unknown>;
}

interface PublishOptions {
  readonly correlationId?: unknown;
  readonly headers?: Readonly<Record<string, unknown>>;
}

interface Received {
  readonly content: Buffer;
  readonly properties: PublishOptions;
}

const REPLY_QUEUE = 'amq.rabbitmq.reply-to';
const CHANGE_TYPES = new Set(['m.push_rules', 'm.pushers']);

const sent = new Map<string, Sent>();
const problems: string[] = [];
let installed = false;

function jsonObject(content: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(content.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

const short = (value: unknown) => JSON.stringify(value).slice(0, 300);

/** A message published: a request is remembered, a change event checked. */
export function published(exchange: string, routingKey: string, content: Buffer, options: PublishOptions = {}): void {
  const body = jsonObject(content);
  if (body === undefined) return;
  if (exchange !== '' && CHANGE_TYPES.has(routingKey)) {
    const problem = changeEventProblems(body);
    if (problem !== undefined) problems.push(`change event ${short(body)}: ${problem}`);
    if (options.headers?.[WIRE_VERSION_HEADER] !== WIRE_VERSION)
      problems.push(`change event ${short(body)} without ${WIRE_VERSION_HEADER}: ${WIRE_VERSION}`);
    return;
  }
  const { correlationId } = options;
  if (exchange !== '' || routingKey.startsWith(REPLY_QUEUE) || typeof body['op'] !== 'string') return;
  if (typeof correlationId !== 'string') return;
  sent.set(correlationId, { op: body['op'], body, valid: requestProblems(body) === undefined });
}

/** A reply received on direct reply-to. */
export function received(message: Received): void {
  const { correlationId, headers } = message.properties;
  if (typeof correlationId !== 'string' || headers?.[WIRE_VERSION_HEADER] === undefined) return;
  const request = sent.get(correlationId);
  if (request === undefined) return;
  const reply = jsonObject(message.content);
  const problem = replyProblems(request.op, reply);
  if (problem !== undefined) {
    problems.push(`reply to ${request.op} ${short(reply)}: ${problem}`);
    return;
  }
  if (request.valid || reply?.['ok'] !== true) return;
  const events = request.body['events'];
  const results = (reply['body'] as { results?: unknown } | undefined)?.results;
  if (request.op === 'evaluate' && Array.isArray(events) && Array.isArray(results)) {
    events.forEach((entry: unknown, index) => {
      const served = (results[index] as { ok?: unknown } | undefined)?.ok === true;
      if (served && evaluateEntryProblems(entry) !== undefined)
        problems.push(`evaluate batch entry ${index} refused by the schema, served: ${short(entry)}`);
    });
    if (events.every((entry: unknown) => evaluateEntryProblems(entry) === undefined))
      problems.push(`evaluate batch refused by the schema, served: ${short(request.body)}`);
    return;
  }
  problems.push(
    `${request.op} refused by the schema (${requestProblems(request.body) ?? ''}), served: ${short(request.body)}`,
  );
}

/** Wraps amqplib's publish and direct reply-to consumers, once per process. */
export function installContractCheck(): void {
  if (installed) return;
  installed = true;
  // amqplib's own classes: every channel (confirm channels publish through Channel's publish).
  // Not among the package's exports: required by its path, the same module the package loads.
  const require = createRequire(import.meta.url);
  const { Channel } = require(join(dirname(require.resolve('amqplib')), 'lib', 'channel_model.js')) as {
    Channel: { prototype: Publishable };
  };
  const original = { publish: Channel.prototype['publish'], consume: Channel.prototype['consume'] };
  Channel.prototype.publish = function (this: Publishable, exchange, routingKey, content, options, ...rest) {
    try {
      published(exchange, routingKey, content, options);
    } catch (error) {
      problems.push(`contract check failed on a publish: ${String(error)}`);
    }
    return original.publish.call(this, exchange, routingKey, content, options, ...rest);
  };
  Channel.prototype.consume = async function (this: Publishable, queue, callback, ...rest) {
    const checked =
      queue === REPLY_QUEUE
        ? (message: Received | null) => {
            try {
              if (message !== null) received(message);
            } catch (error) {
              problems.push(`contract check failed on a reply: ${String(error)}`);
            }
            callback(message);
          }
        : callback;
    return original.consume.call(this, queue, checked, ...rest);
  };
}

/** What broke the contract since the last call. */
export function takeContractProblems(): string[] {
  return problems.splice(0);
}
