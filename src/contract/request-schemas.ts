import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { RULE_KINDS } from '../push-rules/push-rule.js';

/**
 * JSON Schemas of every request of RPC contract v1, written with TypeBox so
 * that each schema is also its TypeScript type (`Static<…>`): the validator
 * and the code that reads a validated request cannot disagree.
 *
 * Objects are open: the contract says unknown extra fields are ignored.
 */

const nullable = <T extends TSchema>(schema: T) =>
  Type.Unsafe<Static<T> | null>({ ...schema, type: [schema['type'] as string, 'null'] });

const Envelope = {
  user_id: Type.String(),
};

const RuleAddress = {
  ...Envelope,
  scope: Type.String(),
  kind: Type.String(),
  rule_id: Type.String({ minLength: 1 }),
};

export const GetPushRulesRequest = Type.Object({ ...Envelope, op: Type.Literal('get_pushrules') });
export const GetPushRuleRequest = Type.Object({ ...RuleAddress, op: Type.Literal('get_pushrule') });
export const DeletePushRuleRequest = Type.Object({ ...RuleAddress, op: Type.Literal('delete_pushrule') });
export const GetPushRuleActionsRequest = Type.Object({ ...RuleAddress, op: Type.Literal('get_pushrule_actions') });
export const GetPushRuleEnabledRequest = Type.Object({ ...RuleAddress, op: Type.Literal('get_pushrule_enabled') });

export const SetPushRuleRequest = Type.Object({
  ...RuleAddress,
  op: Type.Literal('set_pushrule'),
  // Unlike the other rule ops, an unknown kind here is a malformed request.
  kind: Type.Union(RULE_KINDS.map((kind) => Type.Literal(kind))),
  rule: Type.Object({
    actions: Type.Array(Type.Unknown()),
    conditions: Type.Optional(Type.Array(Type.Unknown())),
    pattern: Type.Optional(Type.String()),
  }),
  before: Type.Optional(Type.String()),
  after: Type.Optional(Type.String()),
});

export const SetPushRuleActionsRequest = Type.Object({
  ...RuleAddress,
  op: Type.Literal('set_pushrule_actions'),
  actions: Type.Array(Type.Unknown()),
});

export const SetPushRuleEnabledRequest = Type.Object({
  ...RuleAddress,
  op: Type.Literal('set_pushrule_enabled'),
  enabled: Type.Boolean(),
});

export const GetPushersRequest = Type.Object({ ...Envelope, op: Type.Literal('get_pushers') });

/**
 * Every field of the set action is optional here: a missing one is a
 * MissingParam error naming it, decided by `decidePusherSet`, not a schema
 * failure. Types are still checked here.
 */
export const SetPusherRequest = Type.Object({
  ...Envelope,
  op: Type.Literal('set_pusher'),
  /**
   * The device of the access token, filled by the front; recorded with a
   * new pusher. A `device_id` in `action` is not this: it is ignored.
   */
  device_id: Type.Optional(Type.String({ minLength: 1 })),
  action: Type.Object({
    pushkey: Type.Optional(Type.String()),
    kind: Type.Optional(nullable(Type.String())),
    app_id: Type.Optional(Type.String()),
    app_display_name: Type.Optional(Type.String()),
    device_display_name: Type.Optional(Type.String()),
    profile_tag: Type.Optional(Type.String()),
    lang: Type.Optional(Type.String()),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    append: Type.Optional(Type.Boolean()),
    // MSC3881, under both names; null (matrix-js-sdk's types allow it) is not given.
    enabled: Type.Optional(nullable(Type.Boolean())),
    'org.matrix.msc3881.enabled': Type.Optional(nullable(Type.Boolean())),
  }),
});

/**
 * A homeserver op (trusted publishers only): the pushers of the user's
 * devices `device_ids`, or of all devices but `except_device_id`, or `all`.
 * Exactly one of the three, checked when parsing (BadJson naming them).
 */
export const DeletePushersRequest = Type.Object({
  ...Envelope,
  op: Type.Literal('delete_pushers'),
  device_ids: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  except_device_id: Type.Optional(Type.String({ minLength: 1 })),
  all: Type.Optional(Type.Boolean()),
  include_email: Type.Optional(Type.Boolean()),
});

/** A homeserver op (trusted publishers only): a deactivated user's push rules and pushers go. */
export const DeleteUserDataRequest = Type.Object({ ...Envelope, op: Type.Literal('delete_user_data') });

/**
 * `evaluate`'s recipients grouped by server, the compact form of
 * `recipients` (see docs/rpc-contract.md#evaluate): `display_names`, when
 * present, one per localpart, `null` for none.
 */
export const RecipientsByServerSchema = Type.Array(
  Type.Object({
    server: Type.String(),
    localparts: Type.Array(Type.String()),
    display_names: Type.Optional(Type.Array(Type.Union([Type.String(), Type.Null()]))),
  }),
);

/**
 * One event of an `evaluate` request (see docs/rpc-contract.md): the single
 * form's fields without its `op`, which is also what each entry of the
 * batch form's `events` holds. Exactly one of `recipients` and
 * `recipients_by_server` (checked by toEvaluateCommand).
 */
const EvaluateEventFields = {
  event: Type.Object({
    type: Type.String(),
    room_id: Type.String(),
    sender: Type.String(),
    content: Type.Object({}),
    state_key: Type.Optional(Type.String()),
  }),
  room: Type.Object({
    member_count: Type.Integer({ minimum: 0 }),
    sender_power_level: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    notification_power_levels: Type.Optional(Type.Record(Type.String(), Type.Integer())),
  }),
  recipients: Type.Optional(
    Type.Array(
      Type.Object({
        user_id: Type.String(),
        display_name: Type.Optional(Type.String()),
      }),
    ),
  ),
  recipients_by_server: Type.Optional(RecipientsByServerSchema),
  explain: Type.Optional(Type.Boolean()),
  compact: Type.Optional(Type.Boolean()),
  runs: Type.Optional(Type.Boolean()),
};

/**
 * The `evaluate` request (see docs/rpc-contract.md): the homeserver's, not a
 * user's, so it has no `user_id`. Objects are open, as in every request.
 */
export const EvaluateRequestSchema = Type.Object({
  op: Type.Literal('evaluate'),
  ...EvaluateEventFields,
});

/** An entry of the batch form's `events`: checked on its own, so that a bad one fails alone. */
export const EvaluateEventSchema = Type.Object(EvaluateEventFields);

/**
 * The batch form of `evaluate`: its envelope (`events`, 1 to
 * `evaluate.maxBatchEvents` entries) is checked by toEvaluateBatchCommand
 * in its own words, each entry by `EvaluateEventSchema`; this is the form
 * contract/schemas/request.schema.json publishes.
 */
export const EvaluateBatchRequestSchema = Type.Object({
  op: Type.Literal('evaluate'),
  events: Type.Array(EvaluateEventSchema, { minItems: 1 }),
});

/** A non-negative integer count, as a badge shows it. */
const Count = Type.Integer({ minimum: 0 });

/**
 * The `notify` message (homeserver-only, on the delivery queue): one event,
 * or a badge change when `event_id` is absent, and the recipients to push
 * with what `evaluate` answered for each. Every notification field is
 * optional because the push gateway API makes them all optional; objects
 * are open, as in every request, and fields not named here are not sent on.
 */
export const NotifyRequestSchema = Type.Object({
  op: Type.Literal('notify'),
  notification: Type.Object({
    event_id: Type.Optional(Type.String()),
    room_id: Type.Optional(Type.String()),
    type: Type.Optional(Type.String()),
    sender: Type.Optional(Type.String()),
    sender_display_name: Type.Optional(Type.String()),
    room_name: Type.Optional(Type.String()),
    room_alias: Type.Optional(Type.String()),
    content: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    prio: Type.Optional(Type.Union([Type.Literal('high'), Type.Literal('low')])),
  }),
  recipients: Type.Array(
    Type.Object({
      user_id: Type.String(),
      // Absent means ["notify"]: a recipient listed without actions is pushed.
      actions: Type.Optional(Type.Array(Type.Unknown())),
      // The homeserver's counts: they depend on receipts and every room of the user.
      counts: Type.Optional(
        Type.Object({
          unread: Type.Optional(Count),
          missed_calls: Type.Optional(Count),
        }),
      ),
      user_is_target: Type.Optional(Type.Boolean()),
    }),
  ),
});

/** One schema per op of the request and read queues; the op name is the key. */
export const REQUEST_SCHEMAS = {
  get_pushrules: GetPushRulesRequest,
  get_pushrule: GetPushRuleRequest,
  set_pushrule: SetPushRuleRequest,
  delete_pushrule: DeletePushRuleRequest,
  get_pushrule_actions: GetPushRuleActionsRequest,
  set_pushrule_actions: SetPushRuleActionsRequest,
  get_pushrule_enabled: GetPushRuleEnabledRequest,
  set_pushrule_enabled: SetPushRuleEnabledRequest,
  get_pushers: GetPushersRequest,
  set_pusher: SetPusherRequest,
  delete_pushers: DeletePushersRequest,
  delete_user_data: DeleteUserDataRequest,
} as const;

export type Op = keyof typeof REQUEST_SCHEMAS;
export type RequestOf<O extends Op> = Static<(typeof REQUEST_SCHEMAS)[O]>;
