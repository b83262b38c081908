import { Type, type TSchema } from '@sinclair/typebox';
import { ERROR_KINDS } from '../errors/error-catalogue.js';
import { PUSHER_KINDS } from '../pushers/pusher.js';
import type { Op } from './request-schemas.js';

/**
 * JSON Schemas of what the workers answer: the reply envelope, its error
 * kinds, and each op's success body, as contract/schemas/ publishes them
 * (scripts/generate-contract.ts). The bodies are built by the services
 * (their TypeScript types: `ReplyBodies` in ops.ts); these schemas are
 * what a caller in any language checks them against, and the integration
 * suite holds every reply the workers send to them.
 *
 * Objects are open, as in requests: a later worker may add a field, and a
 * caller ignores the fields it does not know.
 */

const Count = Type.Integer({ minimum: 0 });

/** An action: `notify` and other words, or an object (`set_tweak` and any the spec may add), kept as stored. */
const PushActionSchema = Type.Union([Type.String(), Type.Object({})], {
  description: 'A push action: a word (`notify`; others are kept as stored) or an object (a tweak, `set_tweak`).',
});

const PushActions = Type.Array(PushActionSchema);

/** A condition: its `kind`, and the fields of that kind; unknown kinds are returned as stored. */
const PushConditionSchema = Type.Object({ kind: Type.String() });

const RuleFields = {
  rule_id: Type.String(),
  default: Type.Boolean(),
  enabled: Type.Boolean(),
  actions: PushActions,
};

/** A rule as `get_pushrule` answers it and `get_pushrules` lists it (Matrix `PushRule`). */
export const PushRuleSchema = Type.Object({
  ...RuleFields,
  conditions: Type.Optional(Type.Array(PushConditionSchema)),
  pattern: Type.Optional(Type.String()),
});

const ConditionalRule = Type.Object({ ...RuleFields, conditions: Type.Array(PushConditionSchema) });
const PatternedRule = Type.Object({ ...RuleFields, pattern: Type.String() });
const SimpleRule = Type.Object(RuleFields);

/** A user's whole ruleset: the five kinds, each in priority order. */
const RulesetSchema = Type.Object({
  override: Type.Array(ConditionalRule),
  content: Type.Array(PatternedRule),
  room: Type.Array(SimpleRule),
  sender: Type.Array(SimpleRule),
  underride: Type.Array(ConditionalRule),
});

/** A pusher as `get_pushers` lists it (`WirePusher`). */
const WirePusherSchema = Type.Object({
  pushkey: Type.String(),
  kind: Type.Union(PUSHER_KINDS.map((kind) => Type.Literal(kind))),
  app_id: Type.String(),
  app_display_name: Type.String(),
  device_display_name: Type.String(),
  profile_tag: Type.Optional(Type.String()),
  lang: Type.String(),
  data: Type.Object({}),
  enabled: Type.Boolean(),
  'org.matrix.msc3881.enabled': Type.Boolean(),
  device_id: Type.Optional(Type.String()),
  'org.matrix.msc3881.device_id': Type.Optional(Type.String()),
});

/** A write's success body: Matrix answers `{}`. */
const EmptySchema = Type.Object({}, { description: 'A write succeeded: Matrix answers `{}`.' });

/** Each recipient's matched rule (`explain: true`), `null` when none matched and for the sender. */
const RuleIds = Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()])));

const EvaluateDefaultReply = Type.Object(
  {
    notify: Type.Record(Type.String(), PushActions),
    evaluated: Count,
    rule_ids: RuleIds,
  },
  { description: 'The notified recipients by user ID, with their actions.' },
);

const EvaluateGroupsReply = Type.Object(
  {
    notify_groups: Type.Array(
      Type.Union([
        Type.Object({ actions: PushActions, user_ids: Type.Array(Type.String()) }),
        Type.Object(
          { actions: PushActions, runs: Type.Array(Count) },
          {
            description:
              'runs: pairs [first, count, …]: 0-based positions in the request’s recipient list (the expanded order of recipients_by_server), in list order.',
          },
        ),
      ]),
    ),
    evaluated: Count,
    rule_ids: RuleIds,
  },
  { description: 'compact: true or runs: true: the notified recipients grouped by identical actions.' },
);

/** One event's answer: what the single form answers. */
const EvaluateEventReply = Type.Union([EvaluateDefaultReply, EvaluateGroupsReply]);

/** A failure's body: one entry per kind, with its errcode and HTTP status (error-catalogue.ts). */
export const ErrorBodySchema = Type.Union(
  Object.entries(ERROR_KINDS).map(([kind, { errcode, status }]) =>
    Type.Object({
      kind: Type.Literal(kind),
      errcode: Type.Literal(errcode),
      error: Type.String(),
      status: Type.Literal(status),
    }),
  ),
  { description: 'A front answers `status` with `{"errcode", "error"}`.' },
);

const Success = <T extends TSchema>(body: T) => Type.Object({ ok: Type.Literal(true), body });
const Failure = Type.Object({ ok: Type.Literal(false), error: ErrorBodySchema });

/** The reply envelope of every request that asks for one (`reply_to` and `correlation_id`). */
export const ReplyEnvelopeSchema = Type.Union([Success(Type.Unknown()), Failure]);

const EvaluateBatchReply = Type.Object(
  { results: Type.Array(Type.Union([Success(EvaluateEventReply), Failure])) },
  { description: 'The batch form (`events`): one reply envelope per entry, in the order of the request.' },
);

/** The success body of every op, named as the op is on the wire. */
export const REPLY_BODY_SCHEMAS = {
  get_pushrules: Type.Object({ global: RulesetSchema }),
  get_pushrule: PushRuleSchema,
  set_pushrule: EmptySchema,
  delete_pushrule: EmptySchema,
  get_pushrule_actions: Type.Object({ actions: PushActions }),
  set_pushrule_actions: EmptySchema,
  get_pushrule_enabled: Type.Object({ enabled: Type.Boolean() }),
  set_pushrule_enabled: EmptySchema,
  get_pushers: Type.Object({ pushers: Type.Array(WirePusherSchema) }),
  set_pusher: EmptySchema,
  delete_pushers: Type.Object({ deleted: Count }),
  delete_user_data: EmptySchema,
  evaluate: Type.Union([EvaluateDefaultReply, EvaluateGroupsReply, EvaluateBatchReply]),
  notify: Type.Object(
    {
      recipients: Count,
      devices: Count,
      pending: Type.Optional(
        Type.Integer({
          minimum: 1,
          description:
            'The parts not taken in yet when `delivery.replyWaitMs` ran out (they are still delivered); absent when 0.',
        }),
      ),
    },
    {
      description:
        'Only when the notify asked for a reply: the recipients and devices it was taken in for, once every part is taken in or after `delivery.replyWaitMs`.',
    },
  ),
} as const satisfies Record<Op | 'evaluate' | 'notify', TSchema>;

/** A change event on the events exchange, routing key = its `type`. */
export const ChangeEventSchema = Type.Object({
  user_id: Type.String(),
  type: Type.Union([Type.Literal('m.push_rules'), Type.Literal('m.pushers')]),
  version: Type.Integer({
    minimum: 0,
    description: "Grows with every change of that type for that user and never goes back (the user's data version).",
  }),
});
