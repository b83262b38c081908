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
  {
    description:
      'Instead of recipients (about 45% of its bytes for a large room): the recipients @<localpart>:<server>, group by group, each group in order; display_names, when present, one per localpart, null for none.',
  },
);

/**
 * One event of an `evaluate` request (see docs/rpc-contract.md): the single
 * form's fields without its `op`, which is also what each entry of the
 * batch form's `events` holds. Exactly one of `recipients` and
 * `recipients_by_server` (checked by toEvaluateCommand).
 */
const EvaluateEventFields = {
  event: Type.Object(
    {
      type: Type.String(),
      room_id: Type.String(),
      sender: Type.String(),
      content: Type.Object({}),
      state_key: Type.Optional(Type.String()),
    },
    {
      description:
        'The event in client format, as the homeserver stored it; every other key is kept and can be matched. At most evaluate.maxEventBytes (65,536) bytes as compact JSON.',
    },
  ),
  room: Type.Object({
    member_count: Type.Integer({
      minimum: 0,
      description: "The room's joined members: what room_member_count conditions compare with.",
    }),
    sender_power_level: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], {
        description:
          "The sender's power level; absent or null: no sender_notification_permission condition matches. A creator of a room version 12 room, whose power has no bound, as an integer at least every level of notification_power_levels.",
      }),
    ),
    notification_power_levels: Type.Optional(
      Type.Record(Type.String(), Type.Integer(), {
        description:
          "The power-levels event's `notifications` object: `room` counts as 50 when absent, any other absent key never matches.",
      }),
    ),
  }),
  recipients: Type.Optional(
    Type.Array(
      Type.Object({
        user_id: Type.String(),
        display_name: Type.Optional(
          Type.String({
            description:
              "The recipient's display name in the room, for contains_display_name. Omit it when there is none: null is refused here (unlike in recipients_by_server).",
          }),
        ),
      }),
      {
        description:
          'The local users to evaluate for (possibly none): at most evaluate.maxRecipients (20,000), no user twice; the sender may be among them (evaluated, never notified). A larger room goes over several requests or batch entries, each answered on its own.',
      },
    ),
  ),
  recipients_by_server: Type.Optional(RecipientsByServerSchema),
  explain: Type.Optional(
    Type.Boolean({ description: "Add rule_ids: each recipient's matched rule ID, null when none matched." }),
  ),
  compact: Type.Optional(
    Type.Boolean({
      description:
        'Answer notify_groups with user_ids: the notified grouped by identical actions, each action list once, in the order of its first recipient.',
    }),
  ),
  runs: Type.Optional(
    Type.Boolean({
      description:
        "Answer notify_groups with runs, [first, count, first, count, …]: 0-based positions in this request's (or this entry's) recipient list, recipients_by_server expanded in order. Takes precedence over compact.",
    }),
  ),
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
  notification: Type.Object(
    {
      event_id: Type.Optional(
        Type.String({
          description:
            'Absent: a badge update (counts only), sent to every enabled HTTP pusher of each recipient with prio low; of the updates waiting for one device only the newest is sent.',
        }),
      ),
      room_id: Type.Optional(Type.String()),
      type: Type.Optional(Type.String()),
      sender: Type.Optional(Type.String()),
      sender_display_name: Type.Optional(Type.String()),
      room_name: Type.Optional(Type.String()),
      room_alias: Type.Optional(Type.String()),
      content: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      prio: Type.Optional(
        Type.Union([Type.Literal('high'), Type.Literal('low')], {
          description:
            "Absent: high for m.room.encrypted or when the recipient's tweaks hold sound or a true highlight, else low.",
        }),
      ),
    },
    {
      description:
        'The fields of the push gateway API\'s notification, all optional; a pusher with data.format "event_id_only" gets only event_id, room_id, counts and prio.',
    },
  ),
  recipients: Type.Array(
    Type.Object({
      user_id: Type.String(),
      // Absent means ["notify"]: a recipient listed without actions is pushed.
      actions: Type.Optional(
        Type.Array(Type.Unknown(), {
          description:
            'What evaluate answered for the recipient; absent: ["notify"]. Pushed when it holds notify; each set_tweak becomes a device tweak (highlight without value: true).',
        }),
      ),
      // The homeserver's counts: they depend on receipts and every room of the user.
      counts: Type.Optional(
        Type.Object(
          {
            unread: Type.Optional(Count),
            missed_calls: Type.Optional(Count),
          },
          { description: "The homeserver's counts for the recipient, sent as given (unread 0 clears a badge)." },
        ),
      ),
      user_is_target: Type.Optional(
        Type.Boolean({ description: 'A membership event: whether the recipient is its state_key.' }),
      ),
    }),
    {
      description:
        'Who to push: at most delivery.maxRecipients (100,000) per message. Only their enabled HTTP pushers are delivered to; e-mail pushers are counted, and no mail is sent.',
    },
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
