import type { Static } from '@sinclair/typebox';
import type { EvaluateReply } from '../evaluation/evaluate-request.js';
import type { PushAction, PushRule, Ruleset } from '../push-rules/push-rule.js';
import type { WirePusher } from '../pushers/pusher.js';
import { REQUEST_SCHEMAS, type EvaluateRequestSchema, type NotifyRequestSchema, type Op } from './request-schemas.js';

/** What the contract says of an op besides its schema. */
export interface OpTraits {
  /** Changes nothing: served from the read queue as well as the request queue. */
  readonly readOnly: boolean;
  /**
   * Only a homeserver sends it, on account events (logout, device deletion,
   * password change, deactivation): served only to trusted publishers, never
   * while `amqp.trustedPublishers` is empty.
   */
  readonly homeserverOnly: boolean;
}

/**
 * Every op of the request and read queues, once: the server validates with
 * `REQUEST_SCHEMAS`, the client's calls are typed by the same schemas
 * (`RequestOf`) and their replies by `ReplyOf`. An op is added here, in
 * `REQUEST_SCHEMAS` and `ReplyBodies`, and given a handler.
 */
export const OP_TRAITS = {
  get_pushrules: { readOnly: true, homeserverOnly: false },
  get_pushrule: { readOnly: true, homeserverOnly: false },
  set_pushrule: { readOnly: false, homeserverOnly: false },
  delete_pushrule: { readOnly: false, homeserverOnly: false },
  get_pushrule_actions: { readOnly: true, homeserverOnly: false },
  set_pushrule_actions: { readOnly: false, homeserverOnly: false },
  get_pushrule_enabled: { readOnly: true, homeserverOnly: false },
  set_pushrule_enabled: { readOnly: false, homeserverOnly: false },
  get_pushers: { readOnly: true, homeserverOnly: false },
  set_pusher: { readOnly: false, homeserverOnly: false },
  delete_pushers: { readOnly: false, homeserverOnly: true },
  delete_user_data: { readOnly: false, homeserverOnly: true },
} as const satisfies Record<Op, OpTraits>;

/** A write's success body: Matrix answers `{}`. */
export type EmptyBody = Record<string, never>;

/** The success body of each op, as the Matrix endpoint answers it. */
export interface ReplyBodies {
  readonly get_pushrules: { readonly global: Ruleset };
  readonly get_pushrule: PushRule;
  readonly set_pushrule: EmptyBody;
  readonly delete_pushrule: EmptyBody;
  readonly get_pushrule_actions: { readonly actions: readonly PushAction[] };
  readonly set_pushrule_actions: EmptyBody;
  readonly get_pushrule_enabled: { readonly enabled: boolean };
  readonly set_pushrule_enabled: EmptyBody;
  readonly get_pushers: { readonly pushers: readonly WirePusher[] };
  readonly set_pusher: EmptyBody;
  readonly delete_pushers: { readonly deleted: number };
  readonly delete_user_data: EmptyBody;
}

export type ReplyOf<O extends Op> = ReplyBodies[O];

/** The ops that change nothing. */
export type ReadOp = { [O in Op]: (typeof OP_TRAITS)[O]['readOnly'] extends true ? O : never }[Op];
export type WriteOp = Exclude<Op, ReadOp>;

export const OPS = Object.keys(REQUEST_SCHEMAS) as readonly Op[];

export function isOp(value: string): value is Op {
  return Object.hasOwn(REQUEST_SCHEMAS, value);
}

export function isReadOp(op: Op): op is ReadOp {
  return OP_TRAITS[op].readOnly;
}

export function isHomeserverOp(op: Op): boolean {
  return OP_TRAITS[op].homeserverOnly;
}

/** The `evaluate` op: the homeserver's, on a queue of its own. */
export type EvaluateRequestBody = Static<typeof EvaluateRequestSchema>;
export type EvaluateReplyBody = EvaluateReply;

/** The `notify` message: the homeserver's, on the delivery queue of its own. */
export type NotifyRequestBody = Static<typeof NotifyRequestSchema>;
