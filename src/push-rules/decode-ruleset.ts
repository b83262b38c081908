import { isJsonObject } from '../matrix/json.js';
import {
  RULE_KINDS,
  type ConditionalPushRule,
  type PatternedPushRule,
  type PushRule,
  type RuleKind,
  type Ruleset,
  type SimplePushRule,
} from './push-rule.js';

/**
 * Reads stored `m.push_rules` content (`{"global": Ruleset}`) back into a
 * ruleset, or `undefined` when it is not one. Stored data is trusted for
 * nothing: a document edited by hand or written by another server must not
 * crash an operation, it must surface as a database-class error.
 *
 * A kind missing from `global` reads as empty (older servers omitted empty
 * kinds). When a rule ID repeats within a kind, the first (highest priority)
 * copy wins, as it would when the rules are evaluated.
 */
export function decodeRulesetContent(content: unknown): Ruleset | undefined {
  if (!isJsonObject(content)) return undefined;
  const global = content['global'];
  if (!isJsonObject(global)) return undefined;
  const ruleset: Partial<Record<RuleKind, readonly PushRule[]>> = {};
  for (const kind of RULE_KINDS) {
    const stored = global[kind];
    if (stored === undefined) {
      ruleset[kind] = [];
      continue;
    }
    if (!Array.isArray(stored)) return undefined;
    const rules = decodeRules(kind, stored);
    if (rules === undefined) return undefined;
    ruleset[kind] = rules;
  }
  return ruleset as Ruleset;
}

function decodeRules(kind: RuleKind, stored: readonly unknown[]): readonly PushRule[] | undefined {
  const rules: PushRule[] = [];
  const seen = new Set<string>();
  for (const candidate of stored) {
    const rule = decodeRule(kind, candidate);
    if (rule === undefined) return undefined;
    if (seen.has(rule.rule_id)) continue;
    seen.add(rule.rule_id);
    rules.push(rule);
  }
  return rules;
}

function decodeRule(kind: RuleKind, candidate: unknown): PushRule | undefined {
  if (!isJsonObject(candidate)) return undefined;
  const { rule_id: ruleId, default: isDefault, enabled, actions } = candidate;
  if (typeof ruleId !== 'string' || typeof isDefault !== 'boolean' || typeof enabled !== 'boolean') return undefined;
  if (!Array.isArray(actions) || !actions.every((a) => typeof a === 'string' || isJsonObject(a))) return undefined;
  // Each rule is built in one literal: this runs for every stored rule on
  // every operation, so no intermediate object.
  switch (kind) {
    case 'override':
    case 'underride': {
      const conditions = candidate['conditions'];
      if (!Array.isArray(conditions) || !conditions.every((c) => isJsonObject(c) && typeof c['kind'] === 'string')) {
        return undefined;
      }
      return { rule_id: ruleId, default: isDefault, enabled, actions, conditions } satisfies ConditionalPushRule;
    }
    case 'content': {
      const pattern = candidate['pattern'];
      if (typeof pattern !== 'string') return undefined;
      return { rule_id: ruleId, default: isDefault, enabled, actions, pattern } satisfies PatternedPushRule;
    }
    case 'room':
    case 'sender':
      return { rule_id: ruleId, default: isDefault, enabled, actions } satisfies SimplePushRule;
  }
}

/** The stored form of a ruleset: the `m.push_rules` event content. */
export function encodeRulesetContent(ruleset: Ruleset): { readonly global: Ruleset } {
  return { global: ruleset };
}

const contentJsonCache = new WeakMap<Ruleset, string>();

/**
 * The event content as JSON text. A write measures it (ruleset limits) and
 * then stores it; rulesets are never mutated, so the text is kept per
 * ruleset object and the stringify happens once per write.
 */
export function rulesetContentJson(ruleset: Ruleset): string {
  let json = contentJsonCache.get(ruleset);
  if (json === undefined) {
    json = JSON.stringify(encodeRulesetContent(ruleset));
    contentJsonCache.set(ruleset, json);
  }
  return json;
}
