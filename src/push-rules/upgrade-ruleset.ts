import { MASTER_RULE_ID, RULE_KINDS, type PushRule, type RuleKind, type Ruleset } from './push-rule.js';
import { serverDefaultRuleset } from './server-default-rules.js';

/**
 * Brings a ruleset stored under an older revision of the server defaults up
 * to the current one:
 * - every current default rule is present, in its spec position, with the
 *   spec's current conditions/pattern;
 * - the owner's `enabled` and `actions` choices on a default rule that still
 *   exists are kept;
 * - default rules the current spec no longer has are dropped;
 * - user rules are kept exactly, in their order, above the defaults of their
 *   kind (below `.m.rule.master` in `override`).
 */
export function upgradeRuleset(stored: Ruleset, userId: string): Ruleset {
  const defaults = serverDefaultRuleset(userId);
  const upgraded: Partial<Record<RuleKind, readonly PushRule[]>> = {};
  for (const kind of RULE_KINDS) {
    upgraded[kind] = upgradeKind(stored[kind], defaults[kind]);
  }
  return upgraded as Ruleset;
}

function upgradeKind(stored: readonly PushRule[], defaults: readonly PushRule[]): readonly PushRule[] {
  const storedDefaults = new Map(stored.filter((r) => r.default).map((r) => [r.rule_id, r]));
  const userRules = stored.filter((r) => !r.default);
  const current = defaults.map((fresh) => {
    const previous = storedDefaults.get(fresh.rule_id);
    return previous === undefined ? fresh : { ...fresh, enabled: previous.enabled, actions: previous.actions };
  });
  const [first, ...rest] = current;
  if (first?.rule_id === MASTER_RULE_ID) return [first, ...userRules, ...rest];
  return [...userRules, ...current];
}
