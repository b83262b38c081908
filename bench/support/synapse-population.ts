import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../../src/import/synapse-rows.js';
import { seededRandom as random } from '../../test/support/seeded-random.js';

/**
 * A homeserver's push data for the import benchmark, the same for every run
 * (seeded per user): most users on the default rules with a phone or two,
 * some who changed a default rule, some with 1–50 rules of their own (muted
 * rooms above all), and 1–3 pushers for nine users in ten.
 */
export interface PopulationMix {
  /** Share of users with rules of their own (1–50 each). */
  readonly withRules: number;
  /** Share of users who toggled a default rule or changed its actions (and nothing else). */
  readonly changedDefaults: number;
  /** Share of users with 1–3 pushers. */
  readonly withPushers: number;
}

export const REALISTIC_MIX: PopulationMix = { withRules: 0.15, changedDefaults: 0.1, withPushers: 0.9 };

export const SERVER = 'bench.example.org';
export const userOf = (index: number) => `@user${String(index).padStart(7, '0')}:${SERVER}`;

export interface UserPushData {
  readonly rules: SynapsePushRuleRow[];
  readonly enables: SynapsePushRuleEnableRow[];
  readonly pushers: SynapsePusherRow[];
}

const DEFAULTS_CHANGED = [
  'global/override/.m.rule.suppress_notices',
  'global/override/.m.rule.invite_for_me',
  'global/override/.m.rule.member_event',
  'global/underride/.m.rule.message',
  'global/underride/.m.rule.encrypted',
  'global/underride/.m.rule.room_one_to_one',
];

/** One user's rows, from their index alone. */
export function userPushData(index: number, mix: PopulationMix = REALISTIC_MIX): UserPushData {
  const next = random(index * 2654435761);
  const user = userOf(index);
  const rules: SynapsePushRuleRow[] = [];
  const enables: SynapsePushRuleEnableRow[] = [];
  const pushers: SynapsePusherRow[] = [];
  const kind = next();
  if (kind < mix.withRules) {
    // Skewed towards few rules: most have a handful, some have dozens.
    const count = 1 + Math.floor(49 * next() ** 2);
    for (let k = 0; k < count; k += 1) {
      const rule = aUserRule(user, k, next);
      rules.push(rule);
      enables.push({ user_name: user, rule_id: rule.rule_id, enabled: next() < 0.95 ? 1 : 0 });
    }
  } else if (kind < mix.withRules + mix.changedDefaults) {
    const ruleId = DEFAULTS_CHANGED[Math.floor(next() * DEFAULTS_CHANGED.length)] as string;
    if (next() < 0.6) enables.push({ user_name: user, rule_id: ruleId, enabled: 0 });
    else
      rules.push({
        user_name: user,
        rule_id: ruleId,
        priority_class: -1,
        priority: 1,
        conditions: '[]',
        actions: '["dont_notify"]',
      });
  }
  if (next() < mix.withPushers) {
    const count = 1 + Math.floor(next() * 3);
    for (let k = 0; k < count; k += 1) pushers.push(aPusher(user, index, k, next));
  }
  return { rules, enables, pushers };
}

function aUserRule(user: string, k: number, next: () => number): SynapsePushRuleRow {
  const roll = next();
  const room = `!room${Math.floor(next() * 1e9).toString(36)}${k}:${SERVER}`;
  if (roll < 0.5)
    return {
      user_name: user,
      rule_id: `global/room/${room}`,
      priority_class: 3,
      priority: k,
      conditions: JSON.stringify([{ kind: 'event_match', key: 'room_id', pattern: room }]),
      actions: next() < 0.7 ? '[]' : '["dont_notify"]',
    };
  if (roll < 0.7)
    return {
      user_name: user,
      rule_id: `global/content/keyword${k}`,
      priority_class: 4,
      priority: k,
      conditions: JSON.stringify([{ kind: 'event_match', key: 'content.body', pattern: `keyword${k}` }]),
      actions: '["notify",{"set_tweak":"sound","value":"default"},{"set_tweak":"highlight"}]',
    };
  if (roll < 0.85)
    return {
      user_name: user,
      rule_id: `global/override/rule${k}`,
      priority_class: 5,
      priority: k,
      conditions: JSON.stringify([
        { kind: 'event_match', key: 'content.body', pattern: `*alert${k}*` },
        { kind: 'room_member_count', is: '<10' },
      ]),
      actions: '["notify",{"set_tweak":"highlight","value":true}]',
    };
  if (roll < 0.9)
    return {
      user_name: user,
      rule_id: `global/sender/@friend${k}:${SERVER}`,
      priority_class: 2,
      priority: k,
      conditions: JSON.stringify([{ kind: 'event_match', key: 'user_id', pattern: `@friend${k}:${SERVER}` }]),
      actions: '["notify"]',
    };
  return {
    user_name: user,
    rule_id: `global/underride/rule${k}`,
    priority_class: 1,
    priority: k,
    conditions: JSON.stringify([{ kind: 'event_match', key: 'type', pattern: 'm.room.message' }]),
    actions: '["notify",{"set_tweak":"sound","value":"ping"}]',
  };
}

function aPusher(user: string, index: number, k: number, next: () => number): SynapsePusherRow {
  const email = next() < 0.1;
  return {
    user_name: user,
    access_token: null,
    profile_tag: '',
    kind: email ? 'email' : 'http',
    app_id: email ? 'm.email' : k % 2 === 0 ? 'im.vector.app.android' : 'im.vector.app.ios',
    app_display_name: email ? 'Email Notifications' : 'Element',
    device_display_name: email ? `user${index}@example.org` : `Phone ${k}`,
    pushkey: email
      ? `user${index}.${k}@example.org`
      : `${index.toString(36)}-${k}-${Math.floor(next() * 1e12).toString(36)}`.padEnd(152, 'x'),
    ts: 1_600_000_000_000 + Math.floor(next() * 1e11),
    lang: 'en',
    data: email
      ? '{"brand":"Element"}'
      : '{"url":"https://push.example.org/_matrix/push/v1/notify","format":"event_id_only","default_payload":{"aps":{"mutable-content":1}}}',
    enabled: 1,
    device_id: email ? null : `DEVICE${k}`,
  };
}

/** The rows of users 0 … n−1, one table at a time, generated as they are written. */
export function* rowsOfTable<K extends keyof UserPushData>(n: number, table: K): Generator<UserPushData[K][number]> {
  for (let index = 0; index < n; index += 1) yield* userPushData(index)[table] as UserPushData[K][number][];
}
