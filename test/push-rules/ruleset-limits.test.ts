import { describe, expect, it } from 'vitest';
import { rulesetContentJson } from '../../src/push-rules/decode-ruleset.js';
import { checkRulesetGrowth, countUserRules } from '../../src/push-rules/ruleset-limits.js';
import { aContentRule, aRuleset, aSimpleRule } from '../support/builders.js';
import { expectError } from '../support/expect-result.js';

const rooms = (n: number, pad = '') =>
  Array.from({ length: n }, (_, i) => aSimpleRule({ rule_id: `!r${i}${pad}:example.org` }));
const limits = { maxUserRules: 3, maxRulesetBytes: 64 * 1024 };

describe('ruleset limits', () => {
  it('counts only the rules a user made, over every kind', () => {
    expect(countUserRules(aRuleset())).toBe(0);
    expect(countUserRules(aRuleset({ room: rooms(2), content: [aContentRule()] }))).toBe(3);
  });

  it('lets a ruleset grow up to the rule limit and not past it', () => {
    expect(checkRulesetGrowth(aRuleset({ room: rooms(2) }), aRuleset({ room: rooms(3) }), limits).ok).toBe(true);
    expectError(
      checkRulesetGrowth(aRuleset({ room: rooms(3) }), aRuleset({ room: rooms(4) }), limits),
      'TooLarge',
      'Too many push rules: a user may have at most 3 of their own.',
    );
  });

  it('lets a user already over a lowered limit edit and delete', () => {
    const over = aRuleset({ room: rooms(5) });
    expect(checkRulesetGrowth(over, aRuleset({ room: rooms(4) }), limits).ok).toBe(true);
    expect(checkRulesetGrowth(over, over, limits).ok).toBe(true);
  });

  it('refuses a ruleset whose stored content would grow past the byte limit', () => {
    const small = { maxUserRules: 1000, maxRulesetBytes: 64 * 1024 };
    const big = aRuleset({ room: rooms(200, 'x'.repeat(300)) });
    expect(JSON.stringify({ global: big }).length).toBeGreaterThan(64 * 1024);
    expectError(
      checkRulesetGrowth(aRuleset(), big, small),
      'TooLarge',
      'The push rules would be larger than 65536 bytes.',
    );
    // Shrinking an oversized ruleset is always allowed.
    expect(checkRulesetGrowth(big, aRuleset({ room: rooms(199, 'x'.repeat(300)) }), small).ok).toBe(true);
  });
});

describe('the stored JSON text of a ruleset', () => {
  it('is the event content, and a different ruleset object gets its own text', () => {
    const ruleset = aRuleset({ room: rooms(2) });
    const first = rulesetContentJson(ruleset);
    expect(JSON.parse(first)).toEqual({ global: ruleset });
    expect(rulesetContentJson(ruleset)).toBe(first);
    // Kept per object: a new ruleset (every write makes one) is never served an old text.
    const other = aRuleset({ room: rooms(1) });
    expect(JSON.parse(rulesetContentJson(other))).toEqual({ global: other });
  });
});
