import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RULE_KINDS, type Ruleset } from '../../src/push-rules/push-rule.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { upgradeRuleset } from '../../src/push-rules/upgrade-ruleset.js';
import { aConditionalRule, aContentRule, ALICE, ids } from '../support/builders.js';

/** The spec's defaults as data (team reference file), `${USER_ID}` substituted. */
function referenceDefaults(userId: string): Ruleset {
  const text = readFileSync(new URL('../fixtures/server-default-rules-v1.19.json', import.meta.url), 'utf8');
  const substituted = text.replaceAll('${USER_ID}', userId.replaceAll('\\', '\\\\').replaceAll('"', '\\"'));
  return (JSON.parse(substituted) as { global: Ruleset }).global;
}

describe('server-default ruleset (spec v1.19)', () => {
  const ours = serverDefaultRuleset(ALICE);
  const reference = referenceDefaults(ALICE);

  it.each(RULE_KINDS)('has the reference rules of kind %s, in order', (kind) => {
    expect(ids(ours[kind])).toEqual(ids(reference[kind]));
  });

  const pairs = RULE_KINDS.flatMap((kind) => reference[kind].map((rule, i) => [kind, rule.rule_id, i] as const));
  it.each(pairs)('%s rule %s equals the reference rule', (kind, _id, index) => {
    expect(ours[kind][index]).toEqual(reference[kind][index]);
  });

  it('substitutes the owner in every place the reference names the user', () => {
    const bob = serverDefaultRuleset('@bob:example.net');
    expect(bob).toEqual(referenceDefaults('@bob:example.net'));
    expect(JSON.stringify(bob)).not.toContain(ALICE);
  });

  it('builds unshared objects for each call', () => {
    const a = serverDefaultRuleset(ALICE);
    const b = serverDefaultRuleset(ALICE);
    expect(a).toEqual(b);
    expect(a.override).not.toBe(b.override);
  });
});

describe('upgrading a ruleset built from older defaults', () => {
  // Shaped like a ruleset stored before v1.17: content held
  // .m.rule.contains_user_name, override lacked .m.rule.suppress_edits and
  // had the removed .m.rule.contains_display_name.
  const current = serverDefaultRuleset(ALICE);
  const old: Ruleset = {
    override: [
      ...current.override.filter((r) => r.rule_id === '.m.rule.master').map((r) => ({ ...r, enabled: true })),
      aConditionalRule({ rule_id: 'user.first' }),
      aConditionalRule({ rule_id: 'user.second', enabled: false }),
      {
        rule_id: '.m.rule.contains_display_name',
        default: true,
        enabled: true,
        conditions: [{ kind: 'contains_display_name' }],
        actions: ['notify'],
      },
      ...current.override
        .filter((r) => !['.m.rule.master', '.m.rule.suppress_edits'].includes(r.rule_id))
        .map((r) => (r.rule_id === '.m.rule.reaction' ? { ...r, actions: ['notify'], enabled: false } : r)),
    ],
    content: [
      aContentRule({ rule_id: 'my.cake' }),
      { rule_id: '.m.rule.contains_user_name', default: true, enabled: true, pattern: 'alice', actions: ['notify'] },
    ],
    room: [],
    sender: [],
    underride: [...current.underride],
  };
  const upgraded = upgradeRuleset(old, ALICE);

  it('adds the new default rule in its spec position', () => {
    expect(ids(upgraded.override)).toEqual([
      '.m.rule.master',
      'user.first',
      'user.second',
      ...ids(current.override).slice(1),
    ]);
  });

  it('drops default rules the current spec no longer has', () => {
    expect(ids(upgraded.content)).toEqual(['my.cake']);
    expect(ids(upgraded.override)).not.toContain('.m.rule.contains_display_name');
  });

  it("keeps the owner's enabled and actions on surviving defaults", () => {
    expect(upgraded.override[0]).toEqual({ ...current.override[0], enabled: true });
    const reaction = upgraded.override.find((r) => r.rule_id === '.m.rule.reaction');
    expect(reaction).toMatchObject({ enabled: false, actions: ['notify'], default: true });
  });

  it('leaves user rules exactly as they were', () => {
    expect(upgraded.override.slice(1, 3)).toEqual(old.override.slice(1, 3));
    expect(upgraded.content[0]).toEqual(old.content[0]);
  });

  it('is a no-op on a current ruleset', () => {
    expect(upgradeRuleset(current, ALICE)).toEqual(current);
  });
});
