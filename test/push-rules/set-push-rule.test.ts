import { describe, expect, it } from 'vitest';
import type { RuleKind } from '../../src/push-rules/push-rule.js';
import { setPushRule, type SetPushRuleRequest } from '../../src/push-rules/set-push-rule.js';
import {
  ABSENT,
  aConditionalRule,
  aRuleset,
  aSetRequest,
  ids,
  overridesWithUserRules,
  UNDECODABLE,
  validView,
} from '../support/builders.js';
import { expectError, expectOk, type ContractKind } from '../support/expect-result.js';
import { SEED } from '../support/seed-messages.js';

const userRules = ['a', 'b', 'c'].map((id) => aConditionalRule({ rule_id: id }));
const view = validView(aRuleset({ override: overridesWithUserRules(...userRules) }));

describe('seed 4.3: create a push rule — refusals', () => {
  const rows: [string, Partial<SetPushRuleRequest>, ContractKind, string][] = [
    ['scope is not global', { scope: 'device' }, 'InvalidParam', SEED.scope],
    ['rule ID starts with a dot', { ruleId: '.my.rule' }, 'InvalidParam', SEED.dotReserved],
    ['rule ID contains a slash', { ruleId: 'my/rule' }, 'InvalidParam', SEED.invalidChars],
    ['rule ID contains a backslash', { ruleId: 'my\\rule' }, 'InvalidParam', SEED.invalidChars],
    ['after names a server-default rule', { after: '.m.rule.master' }, 'InvalidParam', SEED.relativeToDefault],
    [
      'before names a server-default rule',
      { before: '.m.rule.suppress_notices' },
      'InvalidParam',
      SEED.relativeToDefault,
    ],
    ['before rule does not exist', { before: 'nope' }, 'NotFound', SEED.placementNotFound],
    ['after rule does not exist', { after: 'nope' }, 'NotFound', SEED.placementNotFound],
    ['before ranks above after', { before: 'a', after: 'c' }, 'InvalidParam', SEED.beforeAboveAfter],
    [
      'room rule ID is not a room ID',
      { kind: 'room', ruleId: 'not-a-room', body: { actions: [] } },
      'InvalidParam',
      SEED.invalidData,
    ],
    [
      'sender rule ID is not a user ID',
      { kind: 'sender', ruleId: 'bob', body: { actions: [] } },
      'InvalidParam',
      SEED.invalidData,
    ],
  ];

  it.each(rows)('%s → %s', (_case, overrides, kind, message) => {
    expectError(setPushRule(view, aSetRequest(overrides)), kind, message);
  });

  it('event absent → NotFound', () => {
    expectError(setPushRule(ABSENT, aSetRequest()), 'NotFound', SEED.eventNotFound);
  });

  it('event undecodable → Database', () => {
    expectError(
      setPushRule(UNDECODABLE, aSetRequest()),
      'Database',
      'The stored push rules event could not be decoded.',
    );
  });

  describe('check order: first failure wins', () => {
    const order: [string, SetPushRuleRequest, ContractKind, string][] = [
      ['scope before event presence', aSetRequest({ scope: 'x', ruleId: '.bad' }), 'InvalidParam', SEED.scope],
      ['dot before invalid characters', aSetRequest({ ruleId: '.a/b' }), 'InvalidParam', SEED.dotReserved],
      [
        'invalid characters before placement',
        aSetRequest({ ruleId: 'a/b', after: '.m.rule.master' }),
        'InvalidParam',
        SEED.invalidChars,
      ],
      [
        'server-default placement before existence',
        aSetRequest({ before: 'nope', after: '.m.rule.x' }),
        'InvalidParam',
        SEED.relativeToDefault,
      ],
      ['existence before ordering', aSetRequest({ before: 'a', after: 'nope' }), 'NotFound', SEED.placementNotFound],
      [
        'the rule itself is not a placement target',
        aSetRequest({ ruleId: 'b', after: 'b' }),
        'NotFound',
        SEED.placementNotFound,
      ],
    ];
    it.each(order)('%s', (_case, request, kind, message) => {
      expectError(setPushRule(view, request), kind, message);
    });

    it('scope is checked before event presence', () => {
      expectError(setPushRule(ABSENT, aSetRequest({ scope: 'x' })), 'InvalidParam', SEED.scope);
    });

    it('event presence is checked before the rule ID', () => {
      expectError(setPushRule(ABSENT, aSetRequest({ ruleId: '.bad' })), 'NotFound', SEED.eventNotFound);
    });
  });
});

describe('seed 4.3: create a push rule — placement', () => {
  const placed = (request: Partial<SetPushRuleRequest>, kind: RuleKind = 'override') =>
    ids(expectOk(setPushRule(view, aSetRequest(request)))[kind]);

  it('a new override rule without placement goes just below .m.rule.master', () => {
    expect(placed({ ruleId: 'new' }).slice(0, 5)).toEqual(['.m.rule.master', 'new', 'a', 'b', 'c']);
  });

  it('a new rule of another kind goes first', () => {
    const underride = placed({ kind: 'underride', ruleId: 'new' }, 'underride');
    expect(underride[0]).toBe('new');
  });

  it.each([
    [{ after: 'a' }, ['a', 'new', 'b', 'c']],
    [{ after: 'c' }, ['a', 'b', 'c', 'new']],
    [{ before: 'a' }, ['new', 'a', 'b', 'c']],
    [{ before: 'c' }, ['a', 'b', 'new', 'c']],
    [{ after: 'a', before: 'c' }, ['a', 'b', 'new', 'c']],
    [{ after: 'a', before: 'b' }, ['a', 'new', 'b', 'c']],
  ])('new rule placed %o', (placement, expected) => {
    expect(placed({ ruleId: 'new', ...placement }).slice(1, 5)).toEqual(expected);
  });

  it.each([
    ['moved down after a later rule', { ruleId: 'a', after: 'b' }, ['b', 'a', 'c']],
    ['moved to the end (after the last rule)', { ruleId: 'a', after: 'c' }, ['b', 'c', 'a']],
    ['moved up before an earlier rule', { ruleId: 'c', before: 'a' }, ['c', 'a', 'b']],
    ['kept in place without placement', { ruleId: 'b' }, ['a', 'b', 'c']],
  ])('existing rule %s', (_case, request, expected) => {
    expect(placed(request).slice(1, 4)).toEqual(expected);
  });

  it('creates rules enabled and not default', () => {
    const next = expectOk(setPushRule(view, aSetRequest({ ruleId: 'new' })));
    expect(next.override[1]).toEqual({
      rule_id: 'new',
      default: false,
      enabled: true,
      conditions: [],
      actions: ['notify'],
    });
  });

  it('replacing an existing rule keeps its enabled flag and replaces its body', () => {
    const disabled = validView(
      aRuleset({ override: overridesWithUserRules(aConditionalRule({ rule_id: 'a', enabled: false })) }),
    );
    const body = { actions: ['dont_notify'], conditions: [{ kind: 'contains_display_name' as const }] };
    const next = expectOk(setPushRule(disabled, aSetRequest({ ruleId: 'a', body })));
    expect(next.override[1]).toEqual({ rule_id: 'a', default: false, enabled: false, ...body });
  });

  it('stores each kind with its own fields', () => {
    const content = expectOk(
      setPushRule(view, aSetRequest({ kind: 'content', ruleId: 'cake', body: { actions: [], pattern: 'cake*' } })),
    );
    expect(content.content).toEqual([
      { rule_id: 'cake', default: false, enabled: true, actions: [], pattern: 'cake*' },
    ]);
    const room = expectOk(
      setPushRule(view, aSetRequest({ kind: 'room', ruleId: '!r:example.org', body: { actions: [] } })),
    );
    expect(room.room).toEqual([{ rule_id: '!r:example.org', default: false, enabled: true, actions: [] }]);
    const sender = expectOk(
      setPushRule(view, aSetRequest({ kind: 'sender', ruleId: '@bob:example.org', body: { actions: [] } })),
    );
    expect(sender.sender).toEqual([{ rule_id: '@bob:example.org', default: false, enabled: true, actions: [] }]);
  });

  it('accepts room IDs without a server part (room version 12)', () => {
    const room = expectOk(
      setPushRule(view, aSetRequest({ kind: 'room', ruleId: '!abcDEF123_-', body: { actions: [] } })),
    );
    expect(ids(room.room)).toEqual(['!abcDEF123_-']);
  });
});
