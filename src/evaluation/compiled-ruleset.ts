import type { CompiledRule } from './compiled-rule.js';
import type { ContentRules } from './content-rules.js';

/**
 * A user's ruleset compiled for evaluation: enabled rules only, in the order
 * they are tried. Rules that can never match (an unknown or malformed
 * condition) are left out: they cannot be the first match.
 */
export interface CompiledRuleset {
  readonly override: readonly CompiledRule[];
  readonly content: ContentRules;
  /** Room and sender rules by rule ID: at most one of each kind can match an event. */
  readonly room: ReadonlyMap<string, CompiledRule>;
  readonly sender: ReadonlyMap<string, CompiledRule>;
  readonly underride: readonly CompiledRule[];
  /**
   * Compiled once for many users, the recipient's user ID a parameter: the
   * event-only part of its evaluation is done once per event (a
   * `RecipientPlan`) rather than once per recipient.
   */
  readonly shared: boolean;
  /** An estimate of the heap this object holds, for a cache bounded by bytes. */
  readonly estimatedBytes: number;
}

/**
 * For one event and one shared ruleset, the rules whose event-only
 * conditions hold, in order, up to and including the first that has no
 * recipient condition (which then decides for everyone the earlier entries
 * do not catch).
 */
export type RecipientPlan = readonly CompiledRule[];
