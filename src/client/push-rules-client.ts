import { randomUUID } from 'node:crypto';
import type { EmptyBody, EvaluateReplyBody, NotifyRequestBody, ReadOp, ReplyOf, WriteOp } from '../contract/ops.js';
import type { Reply } from '../contract/reply.js';
import type { RequestOf } from '../contract/request-schemas.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../evaluation/evaluation-input.js';
import type { PushAction, RuleBody, RuleKind } from '../push-rules/push-rule.js';
import type { RuleAddress } from '../push-rules/rule-address.js';
import type { PusherSetAction } from '../pushers/pusher.js';
import { PushRulesError } from './push-rules-error.js';
import {
  DEFAULT_DELIVER_QUEUE,
  DEFAULT_EVALUATE_QUEUE,
  DEFAULT_QUEUE,
  DEFAULT_READ_QUEUE,
  type CallOptions,
  type DeletePushersOptions,
  type DeletePushersSelector,
  type EvaluateOptions,
  type NotifyNotification,
  type NotifyOptions,
  type NotifyRecipient,
  type NotifyReplyBody,
  type PushRulesClientOptions,
  type RpcTransport,
  type SetPushRuleOptions,
  type SetPusherOptions,
  type WriteOptions,
} from './push-rules-client-options.js';
import { EvaluateCoalescer } from './evaluate-coalescer.js';
import { evaluateAnswer, evaluateItem, type EvaluateManyEvent } from './evaluate-call.js';
import { DEFAULT_TIMEOUT_MS, type RequestOptions } from './rpc-client-options.js';
import { RpcClient } from './rpc-client.js';
import { RpcRequestError, RpcTransportError } from './rpc-errors.js';

// The package entry (`matrix-push-worker/client`) is this file, so its error type and address type come with it.
export {
  DEFAULT_DELIVER_QUEUE,
  DEFAULT_EVALUATE_QUEUE,
  DEFAULT_QUEUE,
  DEFAULT_READ_QUEUE,
} from './push-rules-client-options.js';
export type {
  CallOptions,
  DeletePushersOptions,
  DeletePushersSelector,
  EvaluateOptions,
  NotifyNotification,
  NotifyOptions,
  NotifyRecipient,
  NotifyReplyBody,
  PushRulesClientOptions,
  RpcTransport,
  SetPushRuleOptions,
  SetPusherOptions,
  WriteOptions,
} from './push-rules-client-options.js';
export { PushRulesError } from './push-rules-error.js';
export type { RuleAddress } from '../push-rules/rule-address.js';
export type { PusherSetAction, WirePusher } from '../pushers/pusher.js';
export type { EvaluateReply } from '../evaluation/evaluate-request.js';
export type { EmptyBody } from '../contract/ops.js';
export type { EvaluateCoalescing } from './evaluate-coalescer.js';
export type { EvaluateManyEvent } from './evaluate-call.js';
export type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../evaluation/evaluation-input.js';

/** A request body without its `op`, which the call names. */
type BodyOf<O extends ReadOp | WriteOp> = Omit<RequestOf<O>, 'op'>;

/** `T` with its arrays writable, as the schemas' types have them (the client never writes to them). */
type Mutable<T> = { -readonly [K in keyof T]: Writable<T[K]> };
type Writable<V> = V extends readonly (infer E)[] ? E[] : V;

/**
 * A front homeserver's client for the worker pool: one method per operation
 * of the RPC contract, each resolving with the Matrix response body of that
 * endpoint and rejecting with `PushRulesError` only.
 *
 * `userId` is the user the front has authenticated; the workers act on that
 * user's data and nothing else.
 */
export class PushRulesClient {
  readonly #transport: RpcTransport;
  readonly #evaluateQueue: string;
  readonly #deliverQueue: string;
  readonly #coalescer: EvaluateCoalescer;

  constructor(options: PushRulesClientOptions, transport?: RpcTransport) {
    this.#evaluateQueue = options.evaluateQueue ?? DEFAULT_EVALUATE_QUEUE;
    this.#deliverQueue = options.deliverQueue ?? DEFAULT_DELIVER_QUEUE;
    const coalescing = options.evaluateCoalescing;
    this.#coalescer = new EvaluateCoalescer({
      send: async (body, sendOptions) => this.#transport.request(body, { ...sendOptions, queue: this.#evaluateQueue }),
      defaultTimeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      // Off: a message of one event, always at once (a single event is never held back).
      ...(coalescing === false ? { maxEvents: 1 } : coalescing),
    });
    this.#transport =
      transport ??
      new RpcClient({
        url: options.url,
        queue: options.queue ?? DEFAULT_QUEUE,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        ...(options.publisherUserId === undefined ? {} : { publisherUserId: options.publisherUserId }),
        ...(options.readQueue === null ? {} : { readQueue: options.readQueue ?? DEFAULT_READ_QUEUE }),
        ...(options.onReadFallback === undefined ? {} : { onReadFallback: options.onReadFallback }),
        ...(options.observer === undefined ? {} : { observer: options.observer }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
      });
  }

  async getPushRules(userId: string, options: CallOptions = {}): Promise<ReplyOf<'get_pushrules'>> {
    return this.#read('get_pushrules', { user_id: userId }, options);
  }

  async getPushRule(userId: string, address: RuleAddress, options: CallOptions = {}): Promise<ReplyOf<'get_pushrule'>> {
    return this.#read('get_pushrule', { user_id: userId, ...wireAddress(address) }, options);
  }

  async setPushRule(
    userId: string,
    address: RuleAddress,
    rule: RuleBody,
    options: SetPushRuleOptions = {},
  ): Promise<EmptyBody> {
    const { before, after } = options;
    return this.#write(
      'set_pushrule',
      {
        user_id: userId,
        ...wireAddress(address),
        // Forwarded as given, like the rule: a kind that is not one of the
        // five, or a rule that is not one, is the workers' to refuse
        // (BadJson), so that a front's caller gets the contract's answer for
        // whatever its request held. The casts only drop `readonly`.
        kind: address.kind as RuleKind,
        rule: rule as Mutable<RuleBody>,
        ...(before === undefined ? {} : { before }),
        ...(after === undefined ? {} : { after }),
      },
      options,
    );
  }

  async deletePushRule(userId: string, address: RuleAddress, options: WriteOptions = {}): Promise<EmptyBody> {
    return this.#write('delete_pushrule', { user_id: userId, ...wireAddress(address) }, options);
  }

  async getPushRuleActions(
    userId: string,
    address: RuleAddress,
    options: CallOptions = {},
  ): Promise<ReplyOf<'get_pushrule_actions'>> {
    return this.#read('get_pushrule_actions', { user_id: userId, ...wireAddress(address) }, options);
  }

  async setPushRuleActions(
    userId: string,
    address: RuleAddress,
    actions: readonly PushAction[],
    options: WriteOptions = {},
  ): Promise<EmptyBody> {
    return this.#write(
      'set_pushrule_actions',
      { user_id: userId, ...wireAddress(address), actions: actions as PushAction[] },
      options,
    );
  }

  async getPushRuleEnabled(
    userId: string,
    address: RuleAddress,
    options: CallOptions = {},
  ): Promise<ReplyOf<'get_pushrule_enabled'>> {
    return this.#read('get_pushrule_enabled', { user_id: userId, ...wireAddress(address) }, options);
  }

  async setPushRuleEnabled(
    userId: string,
    address: RuleAddress,
    enabled: boolean,
    options: WriteOptions = {},
  ): Promise<EmptyBody> {
    return this.#write('set_pushrule_enabled', { user_id: userId, ...wireAddress(address), enabled }, options);
  }

  async getPushers(userId: string, options: CallOptions = {}): Promise<ReplyOf<'get_pushers'>> {
    return this.#read('get_pushers', { user_id: userId }, options);
  }

  /** `action` is the client's body as it came; `options.deviceId` is the front's, from the access token. */
  async setPusher(userId: string, action: PusherSetAction, options: SetPusherOptions = {}): Promise<EmptyBody> {
    const { deviceId } = options;
    return this.#write(
      'set_pusher',
      { user_id: userId, ...(deviceId === undefined ? {} : { device_id: deviceId }), action },
      options,
    );
  }

  /**
   * A homeserver's call on an account event: deletes the user's pushers of
   * the selected devices (e-mail pushers only with `includeEmail`) and
   * resolves with how many. The workers serve it only to trusted publishers
   * (`publisherUserId`).
   */
  async deletePushers(
    userId: string,
    selector: DeletePushersSelector,
    options: DeletePushersOptions = {},
  ): Promise<ReplyOf<'delete_pushers'>> {
    return this.#write(
      'delete_pushers',
      {
        user_id: userId,
        ...('deviceIds' in selector ? { device_ids: selector.deviceIds as string[] } : {}),
        ...('exceptDeviceId' in selector ? { except_device_id: selector.exceptDeviceId } : {}),
        ...('all' in selector ? { all: selector.all } : {}),
        ...(options.includeEmail === undefined ? {} : { include_email: options.includeEmail }),
      },
      options,
    );
  }

  /**
   * A homeserver's call when it deactivates a user: erases the user's push
   * rules and every pusher, e-mail ones included. Afterwards the user reads
   * as a new one. Trusted publishers only, like `deletePushers`.
   */
  async deleteUserData(userId: string, options: WriteOptions = {}): Promise<EmptyBody> {
    return this.#write('delete_user_data', { user_id: userId }, options);
  }

  /**
   * The homeserver's question for an event it persisted: which of
   * `recipients` get notified, and with which actions. Sent to the evaluate
   * queue; needs no user (the publisher must be trusted like for any op).
   * Resolves with `notify` (only the notified, by user ID), `evaluated`,
   * and `rule_ids` when `explain` is set; rejects with this event's own
   * `PushRulesError`.
   *
   * A call made while another evaluation is out waits up to
   * `evaluateCoalescing.windowMs` and goes with the calls made meanwhile as
   * one message (evaluate-coalescer.ts); a call made while none is out
   * goes at once. It asks for the compact reply (recipients grouped by
   * identical actions, named by their position in the list: `runs`, a few
   * bytes for a large room) and hands back the same shape as the default
   * one; the recipients of a group share one actions array. A worker that
   * answers with user IDs (one that predates `runs`) or in the default form
   * (one that predates `compact`) is understood as well. From 100
   * recipients it sends them grouped by server (`recipients_by_server`),
   * less than half the bytes: upgrade the workers first.
   */
  async evaluate(
    event: EvaluationEvent,
    room: EvaluationRoom,
    recipients: readonly EvaluationRecipient[],
    options: EvaluateOptions = {},
  ): Promise<EvaluateReplyBody> {
    const { item, order } = evaluateItem({ event, room, recipients, ...options });
    const reply = await this.#replyOf(this.#coalescer.evaluate(item, options.timeoutMs));
    return evaluateAnswer(reply, order);
  }

  /**
   * Several events at once, as a homeserver persisting a batch of events
   * has them: sent now as one message of the batch form (more when they
   * pass `evaluateCoalescing`'s caps), each answered on its own, in order:
   * `{status: 'fulfilled', value}` with what `evaluate()` would resolve
   * with, or `{status: 'rejected', reason}` with its own `PushRulesError`
   * (a bad event, or no reply for its message). One deadline for all.
   */
  async evaluateMany(
    events: readonly EvaluateManyEvent[],
    options: CallOptions = {},
  ): Promise<PromiseSettledResult<EvaluateReplyBody>[]> {
    const items = events.map(evaluateItem);
    const replies = await this.#coalescer.evaluateMany(
      items.map(({ item }) => item),
      options.timeoutMs,
    );
    return replies.map((settled, index): PromiseSettledResult<EvaluateReplyBody> => {
      if (settled.status === 'rejected') return { status: 'rejected', reason: pushRulesErrorOf(settled.reason) };
      try {
        return { status: 'fulfilled', value: evaluateAnswer(settled.value, items[index]?.order ?? []) };
      } catch (error) {
        return { status: 'rejected', reason: error };
      }
    });
  }

  /**
   * Hands one event's notification to the workers for delivery to every
   * recipient's devices (docs/delivery.md). Resolves once the broker
   * confirmed the message, from when nothing is lost; with `reply: true`,
   * once a worker has durably scheduled the deliveries, with how many.
   * Trusted publishers only. A `messageId` (a fresh one unless given) makes
   * a message published again after a failure schedule nothing twice.
   */
  async notify(
    notification: NotifyNotification,
    recipients: readonly NotifyRecipient[],
    options?: NotifyOptions & { readonly reply?: false },
  ): Promise<void>;
  async notify(
    notification: NotifyNotification,
    recipients: readonly NotifyRecipient[],
    options: NotifyOptions & { readonly reply: true },
  ): Promise<NotifyReplyBody>;
  async notify(
    notification: NotifyNotification,
    recipients: readonly NotifyRecipient[],
    options: NotifyOptions = {},
  ): Promise<NotifyReplyBody | void> {
    // The cast only drops `readonly`: the client never writes to the recipients or their actions.
    const body: NotifyRequestBody = {
      op: 'notify',
      notification,
      recipients: recipients as NotifyRequestBody['recipients'],
    };
    const sendOptions: RequestOptions = {
      queue: this.#deliverQueue,
      noExpiration: true,
      messageId: options.messageId ?? randomUUID(),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    };
    if (options.reply === true) return this.#call<NotifyReplyBody>(body, sendOptions);
    try {
      await this.#transport.publish(body, sendOptions);
    } catch (error) {
      if (error instanceof RpcTransportError) throw PushRulesError.fromTransport(error.reason);
      if (error instanceof RpcRequestError) throw PushRulesError.unserializable();
      throw error;
    }
  }

  /** Rejects pending calls (`reason: 'closed'`) and disconnects. Idempotent. */
  async close(): Promise<void> {
    this.#coalescer.close();
    await this.#transport.close();
  }

  /** A read: its body typed by the same schema the workers validate it with, its reply by the contract. */
  async #read<O extends ReadOp>(op: O, body: BodyOf<O>, options: CallOptions): Promise<ReplyOf<O>> {
    return this.#call<ReplyOf<O>>(
      { op, ...body },
      { read: true, ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }) },
    );
  }

  /** A write, with a `messageId` (a fresh one unless given) so that a retry is applied once. */
  async #write<O extends WriteOp>(op: O, body: BodyOf<O>, options: WriteOptions): Promise<ReplyOf<O>> {
    return this.#call<ReplyOf<O>>(
      { op, ...body },
      {
        messageId: options.messageId ?? randomUUID(),
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      },
    );
  }

  async #call<T>(body: object, options: RequestOptions): Promise<T> {
    const reply = await this.#replyOf(this.#transport.request(body, options));
    if (!reply.ok) throw new PushRulesError(reply.error);
    // The worker validated what it stored and answers the contract's shapes.
    return reply.body as T;
  }

  /** The reply envelope, or the `PushRulesError` for why there is none. */
  async #replyOf(sent: Promise<Reply>): Promise<Reply> {
    try {
      return await sent;
    } catch (error) {
      throw pushRulesErrorOf(error);
    }
  }
}

/** What a call rejects with when it got no reply envelope. */
function pushRulesErrorOf(error: unknown): unknown {
  if (error instanceof RpcTransportError) return PushRulesError.fromTransport(error.reason);
  // Nothing was sent: the caller's own argument is at fault, not the service.
  if (error instanceof RpcRequestError) return PushRulesError.unserializable();
  return error;
}

function wireAddress(address: RuleAddress): { scope: string; kind: string; rule_id: string } {
  return { scope: address.scope, kind: address.kind, rule_id: address.ruleId };
}
