import type {
  ConditionalPushRule,
  PatternedPushRule,
  PushRule,
  Ruleset,
  SimplePushRule,
} from '../../src/push-rules/push-rule.js';
import type { PushRulesEventView, PushRulesLookup } from '../../src/push-rules/push-rules-event.js';
import type { RuleAddress } from '../../src/push-rules/rule-address.js';
import { DEFAULT_RULES_REVISION, serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { SetPushRuleRequest } from '../../src/push-rules/set-push-rule.js';
import type { PusherSetAction } from '../../src/pushers/pusher.js';

export const ALICE = '@alice:example.org';

export function aConditionalRule(overrides: Partial<ConditionalPushRule> = {}): ConditionalPushRule {
  return {
    rule_id: 'my.rule',
    default: false,
    enabled: true,
    conditions: [{ kind: 'event_match', key: 'content.body', pattern: 'cake' }],
    actions: ['notify'],
    ...overrides,
  };
}

export function aContentRule(overrides: Partial<PatternedPushRule> = {}): PatternedPushRule {
  return { rule_id: 'cake', default: false, enabled: true, pattern: 'cake', actions: ['notify'], ...overrides };
}

export function aSimpleRule(overrides: Partial<SimplePushRule> = {}): SimplePushRule {
  return { rule_id: '!room:example.org', default: false, enabled: true, actions: ['notify'], ...overrides };
}

/** Alice's server defaults, with per-kind lists replaced as given. */
export function aRuleset(overrides: Partial<Ruleset> = {}): Ruleset {
  return { ...serverDefaultRuleset(ALICE), ...overrides };
}

/** The default override list with user rules inserted right below master. */
export function overridesWithUserRules(...userRules: ConditionalPushRule[]): ConditionalPushRule[] {
  const [master, ...rest] = serverDefaultRuleset(ALICE).override;
  if (master === undefined) throw new Error('defaults have no master rule');
  return [master, ...userRules, ...rest];
}

export function validView(ruleset: Ruleset = aRuleset()): PushRulesEventView {
  return { status: 'valid', ruleset, upgraded: false };
}

export const ABSENT: PushRulesEventView = { status: 'missing', reason: 'absent' };
export const UNDECODABLE: PushRulesEventView = { status: 'undecodable' };

export function storedLookup(
  content: unknown,
  defaultsRevision: string | undefined = DEFAULT_RULES_REVISION,
): PushRulesLookup {
  return { found: true, event: { type: 'm.push_rules', content }, defaultsRevision };
}

export function anAddress(overrides: Partial<RuleAddress> = {}): RuleAddress {
  return { scope: 'global', kind: 'override', ruleId: 'my.rule', ...overrides };
}

export function aSetRequest(overrides: Partial<SetPushRuleRequest> = {}): SetPushRuleRequest {
  return {
    scope: 'global',
    kind: 'override',
    ruleId: 'new.rule',
    body: { actions: ['notify'], conditions: [] },
    ...overrides,
  };
}

export function ids(rules: readonly PushRule[]): string[] {
  return rules.map((r) => r.rule_id);
}

const PUSHER_SET_ACTION = {
  pushkey: 'pushkey-1',
  kind: 'http',
  app_id: 'org.example.app',
  app_display_name: 'Example',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only' },
} as const satisfies PusherSetAction;

/**
 * A complete `POST /pushers/set` body for an HTTP pusher (as the client
 * sends it, and as `get_pushers` then lists it, with `enabled` added). The
 * overrides replace the defaults in the type too (an intersection of two
 * `pushkey` literals would be `never`).
 */
export function aPusherSetAction<const O extends Partial<PusherSetAction> = object>(
  overrides?: O,
): Omit<typeof PUSHER_SET_ACTION, keyof O> & O {
  return { ...PUSHER_SET_ACTION, ...(overrides as O) };
}
