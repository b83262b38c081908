import { describe, expect, it } from 'vitest';
import { compileRuleset, compileUserRuleset, sharedDefaultRuleset } from '../../src/evaluation/compile-ruleset.js';
import { evaluateRecipient } from '../../src/evaluation/evaluate-recipient.js';
import type { EvaluationEvent } from '../../src/evaluation/evaluation-input.js';
import { prepareEvent } from '../../src/evaluation/prepared-event.js';
import type { ConditionalPushRule, PushAction, RuleKind, Ruleset } from '../../src/push-rules/push-rule.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { aConditionalRule, aContentRule, aSimpleRule } from '../support/builders.js';
import {
  aBody,
  aMessage,
  aRecipient,
  aRoom,
  BOB,
  EMPTY_RULESET,
  outcomeOf,
  ROOM_ID,
  SENDER,
} from '../support/evaluation-builders.js';

const always = (ruleId: string, actions: PushAction[] = ['notify']): ConditionalPushRule =>
  aConditionalRule({ rule_id: ruleId, conditions: [], actions });
const never = (ruleId: string): ConditionalPushRule =>
  aConditionalRule({ rule_id: ruleId, conditions: [{ kind: 'event_match', key: 'type', pattern: 'm.nothing' }] });

/** A ruleset with one matching rule in each kind, for the body "cake". */
const everyKind: Ruleset = {
  override: [always('override')],
  content: [aContentRule({ rule_id: 'content', pattern: 'cake' })],
  room: [aSimpleRule({ rule_id: ROOM_ID })],
  sender: [aSimpleRule({ rule_id: SENDER })],
  underride: [always('underride')],
};

describe('which rule decides', () => {
  it.each<[RuleKind[], string | null]>([
    [[], 'override'],
    [['override'], 'content'],
    [['override', 'content'], ROOM_ID],
    [['override', 'content', 'room'], SENDER],
    [['override', 'content', 'room', 'sender'], 'underride'],
    [['override', 'content', 'room', 'sender', 'underride'], null],
  ])('with the kinds %j emptied, the match is %s (override, content, room, sender, underride)', (emptied, expected) => {
    const ruleset = { ...everyKind, ...Object.fromEntries(emptied.map((kind) => [kind, []])) };
    expect(outcomeOf(ruleset, aBody('I like cake')).ruleId).toBe(expected);
  });

  it('tries rules inside a kind in order: the first match decides', () => {
    const ruleset = { ...EMPTY_RULESET, override: [never('a'), always('b'), always('c')] };
    expect(outcomeOf(ruleset).ruleId).toBe('b');
  });

  it('skips disabled rules', () => {
    const ruleset = { ...everyKind, override: [{ ...always('off'), enabled: false }, always('on')] };
    expect(outcomeOf(ruleset).ruleId).toBe('on');
  });

  it.each<[RuleKind, string]>([
    ['override', 'override'],
    ['content', 'content'],
    ['room', ROOM_ID],
    ['sender', SENDER],
    ['underride', 'underride'],
  ])('skips a disabled %s rule', (kind, ruleId) => {
    const only = (enabled: boolean): Ruleset => ({
      ...EMPTY_RULESET,
      [kind]: everyKind[kind].map((rule) => ({ ...rule, enabled })),
    });
    expect(outcomeOf(only(true), aBody('cake')).ruleId).toBe(ruleId);
    expect(outcomeOf(only(false), aBody('cake')).ruleId).toBeNull();
  });

  it('needs every condition of a rule to match; an empty list always matches', () => {
    const both = aConditionalRule({
      rule_id: 'both',
      conditions: [
        { kind: 'event_match', key: 'type', pattern: 'm.room.message' },
        { kind: 'event_match', key: 'content.msgtype', pattern: 'm.notice' },
      ],
    });
    const ruleset = { ...EMPTY_RULESET, override: [both], underride: [always('empty')] };
    expect(outcomeOf(ruleset).ruleId).toBe('empty');
    expect(outcomeOf(ruleset, aMessage({}, { msgtype: 'm.notice' })).ruleId).toBe('both');
  });

  it('matches a content rule on content.body at word boundaries, case-insensitively', () => {
    const ruleset = { ...EMPTY_RULESET, content: [aContentRule({ rule_id: 'c', pattern: 'Cake' })] };
    expect(outcomeOf(ruleset, aBody('CAKE!')).ruleId).toBe('c');
    expect(outcomeOf(ruleset, aBody('cakes')).ruleId).toBeNull();
    expect(outcomeOf(ruleset, aMessage({}, { body: undefined as never, cake: 'cake' })).ruleId).toBeNull();
  });

  it.each([
    [ROOM_ID, true],
    ['!ROOM:example.org', false],
    ['!*:example.org', false],
    ['!room:example.org ', false],
  ])('matches a room rule %j only on room_id equal to it: %s', (ruleId, expected) => {
    const ruleset = { ...EMPTY_RULESET, room: [aSimpleRule({ rule_id: ruleId })] };
    expect(outcomeOf(ruleset).ruleId).toBe(expected ? ruleId : null);
  });

  it.each([
    [SENDER, true],
    ['@SENDER:example.org', false],
    ['@*:example.org', false],
  ])('matches a sender rule %j only on sender equal to it: %s', (ruleId, expected) => {
    const ruleset = { ...EMPTY_RULESET, sender: [aSimpleRule({ rule_id: ruleId })] };
    expect(outcomeOf(ruleset).ruleId).toBe(expected ? ruleId : null);
  });

  it('uses the first enabled room rule of an ID', () => {
    const ruleset = {
      ...EMPTY_RULESET,
      room: [
        aSimpleRule({ enabled: false, actions: ['a'] }),
        aSimpleRule({ actions: ['b'] }),
        aSimpleRule({ actions: ['c'] }),
      ],
    };
    expect(outcomeOf(ruleset).actions).toEqual(['b']);
  });
});

describe('actions', () => {
  it.each<[string, PushAction[], boolean, PushAction[]]>([
    ['notify', ['notify'], true, ['notify']],
    ['no actions', [], false, []],
    [
      'tweaks in order',
      ['notify', { set_tweak: 'sound', value: 'default' }, { set_tweak: 'highlight' }],
      true,
      ['notify', { set_tweak: 'sound', value: 'default' }, { set_tweak: 'highlight' }],
    ],
    ['dont_notify and coalesce removed', ['dont_notify', 'notify', 'coalesce'], true, ['notify']],
    [
      'unknown strings and tweaks kept',
      ['org.example.act', 'notify', { set_tweak: 'org.example', value: [1] }, { other: true }],
      true,
      ['org.example.act', 'notify', { set_tweak: 'org.example', value: [1] }, { other: true }],
    ],
    ['dont_notify alone', ['dont_notify'], false, []],
    ['tweaks without notify', [{ set_tweak: 'highlight' }], false, [{ set_tweak: 'highlight' }]],
  ])('%s', (_what, actions, notify, replied) => {
    const outcome = outcomeOf({ ...EMPTY_RULESET, override: [always('r', actions)] });
    expect(outcome).toEqual({ ruleId: 'r', notify, actions: replied });
  });
});

describe('the sender', () => {
  it('is never notified of its own event, whatever its rules say', () => {
    expect(outcomeOf(everyKind, aMessage(), aRoom(), aRecipient({ user_id: SENDER }))).toEqual({
      ruleId: null,
      notify: false,
      actions: [],
    });
    const event = prepareEvent(aMessage(), aRoom());
    expect(evaluateRecipient(event, sharedDefaultRuleset(), { user_id: SENDER }).notify).toBe(false);
  });
});

describe('content keywords (the index must keep rule order)', () => {
  const keywords = (patterns: string[]) =>
    patterns.map((pattern, i) => aContentRule({ rule_id: `k${i}:${pattern}`, pattern, actions: ['notify', `${i}`] }));
  const filler = Array.from({ length: 30 }, (_, i) => `rareword${i}`);
  const decide = (patterns: string[], body: string) =>
    outcomeOf({ ...EMPTY_RULESET, content: keywords(patterns) }, aBody(body)).ruleId;

  it.each([
    [
      'the first rule in order, not the first word of the body',
      [...filler, 'beta', 'alpha'],
      'alpha then beta',
      'k30:beta',
    ],
    [
      'a phrase sharing its first word with another keyword',
      [...filler, 'deploy now', 'deploy'],
      'we deploy now',
      'k30:deploy now',
    ],
    [
      'the later keyword when the phrase does not match',
      [...filler, 'deploy now', 'deploy'],
      'we deploy later',
      'k31:deploy',
    ],
    ['a glob before an indexed literal', [...filler, 'gam?', 'alpha'], 'alpha game', 'k30:gam?'],
    ['an indexed literal before a glob', [...filler, 'alpha', 'gam?'], 'game alpha', 'k30:alpha'],
    ['a CJK keyword (not indexed) before a literal', [...filler, '猫', 'alpha'], 'alpha 我的猫很可爱', 'k30:猫'],
    ['a punctuation keyword (not indexed)', [...filler, '#ops', 'alpha'], 'alpha #ops', 'k30:#ops'],
    ['a literal with an upper-case keyword', [...filler, 'URGENT'], 'this is urgent!', 'k30:URGENT'],
    ['a keyword that is a prefix of a word does not match', [...filler, 'alp'], 'alpha', null],
    [
      'a keyword matching with ſ in the body (index bypassed)',
      [...filler, 'stop', 'alpha'],
      'alpha \u017ftop',
      'k30:stop',
    ],
    ['no keyword in the body', [...filler], 'nothing here', null],
    ['a repeated word', [...filler, 'echo'], 'echo echo echo', 'k30:echo'],
  ])('%s', (_what, patterns, body, expected) => {
    expect(decide(patterns, body)).toBe(expected);
    // The same answer without the index (fewer keywords than its threshold).
    const small = patterns.slice(filler.length);
    const smallExpected =
      expected === null ? null : expected.replace(/^k(\d+)/, (_, n: string) => `k${Number(n) - filler.length}`);
    expect(decide(small, body)).toBe(smallExpected);
  });
});

describe('the shared default ruleset', () => {
  const carol = '@carol:example.org';
  const invite = (stateKey: string): EvaluationEvent => ({
    event_id: '$i',
    type: 'm.room.member',
    room_id: ROOM_ID,
    sender: SENDER,
    state_key: stateKey,
    content: { membership: 'invite' },
  });
  const mention = (userIds: string[]) => aMessage({}, { 'm.mentions': { user_ids: userIds } });
  const events: [string, EvaluationEvent, number][] = [
    ['an invite for bob', invite(BOB), 10],
    ['an invite for carol', invite(carol), 10],
    ['an invite for bob, state_key in upper case', invite(BOB.toUpperCase()), 10],
    ['a mention of bob', mention([BOB]), 10],
    ['a mention of carol', mention([carol, '@x:example.org']), 10],
    ['a message in a two-member room', aMessage(), 2],
    ['a message', aMessage(), 10],
    ['a notice', aMessage({}, { msgtype: 'm.notice' }), 10],
    ['an encrypted event in a DM', aMessage({ type: 'm.room.encrypted', content: { algorithm: 'x' } }), 2],
    ['an edit', aMessage({}, { 'm.relates_to': { rel_type: 'm.replace' } }), 10],
    ['a room mention', aMessage({}, { 'm.mentions': { room: true } }), 10],
    ['a room mention as a string', aMessage({}, { 'm.mentions': { room: 'true' } }), 10],
    [
      'a tombstone',
      { event_id: '$t', type: 'm.room.tombstone', room_id: ROOM_ID, sender: SENDER, state_key: '', content: {} },
      10,
    ],
  ];

  it.each(events)('answers %s for each recipient as their own defaults would', (_what, event, members) => {
    const room = aRoom({ member_count: members, sender_power_level: 50 });
    const prepared = prepareEvent(event, room);
    for (const userId of [BOB, carol]) {
      const recipient = { user_id: userId };
      const own = evaluateRecipient(prepareEvent(event, room), compileRuleset(serverDefaultRuleset(userId)), recipient);
      expect(evaluateRecipient(prepared, sharedDefaultRuleset(), recipient)).toEqual(own);
    }
  });

  it('notifies only the invited user and only the mentioned user', () => {
    const shared = sharedDefaultRuleset();
    const invited = prepareEvent(invite(BOB), aRoom());
    expect(evaluateRecipient(invited, shared, { user_id: BOB }).ruleId).toBe('.m.rule.invite_for_me');
    expect(evaluateRecipient(invited, shared, { user_id: carol }).ruleId).toBe('.m.rule.member_event');
    const mentioned = prepareEvent(mention([carol]), aRoom());
    expect(evaluateRecipient(mentioned, shared, { user_id: carol }).ruleId).toBe('.m.rule.is_user_mention');
    expect(evaluateRecipient(mentioned, shared, { user_id: BOB }).ruleId).toBe('.m.rule.message');
  });

  it('is one object, which a stored copy of the defaults shares and a changed ruleset does not', () => {
    expect(sharedDefaultRuleset()).toBe(sharedDefaultRuleset());
    expect(sharedDefaultRuleset().shared).toBe(true);
    const stored = JSON.parse(JSON.stringify(serverDefaultRuleset(BOB))) as Ruleset;
    expect(compileUserRuleset(stored, BOB)).toBe(sharedDefaultRuleset());
    expect(compileUserRuleset(stored, carol)).not.toBe(sharedDefaultRuleset());
    const changed = {
      ...stored,
      override: stored.override.map((r) => (r.rule_id === '.m.rule.master' ? { ...r, enabled: true } : r)),
    };
    const compiled = compileUserRuleset(changed, BOB);
    expect(compiled).not.toBe(sharedDefaultRuleset());
    expect(compiled.shared).toBe(false);
    expect(evaluateRecipient(prepareEvent(aMessage(), aRoom()), compiled, { user_id: BOB }).ruleId).toBe(
      '.m.rule.master',
    );
  });
});

describe('estimated size', () => {
  const withKeywords = (count: number): Ruleset => ({
    ...serverDefaultRuleset(BOB),
    content: Array.from({ length: count }, (_, i) => aContentRule({ rule_id: `kw${i}`, pattern: `keyword${i}` })),
  });

  it('grows with the rules a ruleset holds, by a few hundred bytes per keyword rule', () => {
    const none = compileRuleset(withKeywords(0)).estimatedBytes;
    const ten = compileRuleset(withKeywords(10)).estimatedBytes;
    const thousand = compileRuleset(withKeywords(1000)).estimatedBytes;
    expect(none).toBeGreaterThan(compileRuleset(EMPTY_RULESET).estimatedBytes);
    expect(ten).toBeGreaterThan(none);
    // Calibrated on Node 20: about 300 bytes of heap per keyword rule.
    const perKeyword = (thousand - ten) / 990;
    expect(perKeyword).toBeGreaterThan(150);
    expect(perKeyword).toBeLessThan(1000);
  });

  it('counts the shared defaults once, at a few kilobytes', () => {
    expect(sharedDefaultRuleset().estimatedBytes).toBeGreaterThan(2_000);
    expect(sharedDefaultRuleset().estimatedBytes).toBeLessThan(20_000);
  });
});
