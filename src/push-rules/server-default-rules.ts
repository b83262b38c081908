import type { ConditionalPushRule, PushAction, PushCondition, Ruleset } from './push-rule.js';

/**
 * The revision of the server-default rules this build serves. A stored
 * ruleset records the revision it was built from; a different one is
 * upgraded on its next read (see `upgrade-ruleset.ts`).
 */
export const DEFAULT_RULES_REVISION = 'v1.19';

const notify = 'notify';
const sound = (value: string): PushAction => ({ set_tweak: 'sound', value });
const highlight: PushAction = { set_tweak: 'highlight' };

const eventMatch = (key: string, pattern: string): PushCondition => ({ kind: 'event_match', key, pattern });
const typeIs = (type: string): PushCondition => eventMatch('type', type);
const emptyStateKey = eventMatch('state_key', '');
const memberCount = (is: string): PushCondition => ({ kind: 'room_member_count', is });

function rule(
  ruleId: string,
  conditions: readonly PushCondition[],
  actions: readonly PushAction[],
  enabled = true,
): ConditionalPushRule {
  return { rule_id: ruleId, default: true, enabled, conditions, actions };
}

/**
 * The spec's server-default ruleset (client-server API v1.19, "Predefined
 * rules"), in priority order, for the given owner. `content`, `room` and
 * `sender` have had no server-default rules since v1.17.
 *
 * Each call builds fresh objects, so callers may hand the result on without
 * sharing structure between users.
 */
export function serverDefaultRuleset(userId: string): Ruleset {
  return {
    override: [
      rule('.m.rule.master', [], [], false),
      rule('.m.rule.suppress_notices', [eventMatch('content.msgtype', 'm.notice')], []),
      rule(
        '.m.rule.invite_for_me',
        [typeIs('m.room.member'), eventMatch('content.membership', 'invite'), eventMatch('state_key', userId)],
        [notify, sound('default')],
      ),
      rule('.m.rule.member_event', [typeIs('m.room.member')], []),
      rule(
        '.m.rule.is_user_mention',
        [{ kind: 'event_property_contains', key: 'content.m\\.mentions.user_ids', value: userId }],
        [notify, sound('default'), highlight],
      ),
      rule(
        '.m.rule.is_room_mention',
        [
          { kind: 'event_property_is', key: 'content.m\\.mentions.room', value: true },
          { kind: 'sender_notification_permission', key: 'room' },
        ],
        [notify, highlight],
      ),
      rule('.m.rule.tombstone', [typeIs('m.room.tombstone'), emptyStateKey], [notify, highlight]),
      rule('.m.rule.reaction', [typeIs('m.reaction')], []),
      rule('.m.rule.room.server_acl', [typeIs('m.room.server_acl'), emptyStateKey], []),
      rule(
        '.m.rule.suppress_edits',
        [{ kind: 'event_property_is', key: 'content.m\\.relates_to.rel_type', value: 'm.replace' }],
        [],
      ),
    ],
    content: [],
    room: [],
    sender: [],
    underride: [
      rule('.m.rule.call', [typeIs('m.call.invite')], [notify, sound('ring')]),
      rule(
        '.m.rule.encrypted_room_one_to_one',
        [memberCount('2'), typeIs('m.room.encrypted')],
        [notify, sound('default')],
      ),
      rule('.m.rule.room_one_to_one', [memberCount('2'), typeIs('m.room.message')], [notify, sound('default')]),
      rule('.m.rule.message', [typeIs('m.room.message')], [notify]),
      rule('.m.rule.encrypted', [typeIs('m.room.encrypted')], [notify]),
    ],
  };
}
