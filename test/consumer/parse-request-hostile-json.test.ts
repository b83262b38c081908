import { describe, expect, it } from 'vitest';
import { parseRequest } from '../../src/consumer/parse-request.js';
import { ALICE } from '../support/builders.js';
import { expectError, expectOk } from '../support/expect-result.js';
import { encode, LIMIT, parse } from '../support/parse-request-builders.js';
import {
  expectCleanPrototype,
  forbiddenKeyMessage,
  POISONED_CASES,
  prototypeKeys,
} from '../support/poisoned-bodies.js';

describe('parsing requests: nesting depth (BadJson naming the limit, never a thrown RangeError)', () => {
  const MAX = LIMIT.maxJsonDepth;
  const TOO_DEEP = `Request body nests arrays and objects deeper than ${MAX} levels.`;
  /** `levels` arrays, one inside the other, as JSON text. */
  const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  const pusherWithData = (data: string) =>
    `{"op": "set_pusher", "user_id": "${ALICE}", "action": {"kind": "email", "app_id": "m.email", "pushkey": "a@example.org", "data": ${data}}}`;
  const ruleWithCondition = (condition: string) =>
    `{"op": "set_pushrule", "user_id": "${ALICE}", "scope": "global", "kind": "override", "rule_id": "r", "rule": {"actions": [], "conditions": [${condition}]}}`;
  const actionsWithTweak = (value: string) =>
    `{"op": "set_pushrule_actions", "user_id": "${ALICE}", "scope": "global", "kind": "override", "rule_id": "r", "actions": [{"set_tweak": "x", "value": ${value}}]}`;

  it('the default limit is 32', () => {
    expect(MAX).toBe(32);
  });

  // Levels: the envelope, `action`, `data` (3); the envelope, `rule`,
  // `conditions`, the condition (4); the envelope, `actions`, the tweak (3).
  it.each([
    ['pusher data at the limit', true, pusherWithData(`{"x": ${nested(MAX - 3)}}`)],
    ['pusher data one level over', false, pusherWithData(`{"x": ${nested(MAX - 2)}}`)],
    ['a condition at the limit', true, ruleWithCondition(`{"kind": "x", "v": ${nested(MAX - 4)}}`)],
    ['a condition one level over', false, ruleWithCondition(`{"kind": "x", "v": ${nested(MAX - 3)}}`)],
    ['a tweak value at the limit', true, actionsWithTweak(nested(MAX - 3))],
    ['a tweak value one level over', false, actionsWithTweak(nested(MAX - 2))],
    ['brackets in strings do not count', true, pusherWithData(`{"x": "${'['.repeat(4_000)}"}`)],
  ])('%s: accepted %s', (_case, accepted, text) => {
    const result = parseRequest(encode(text), LIMIT);
    if (accepted) expectOk(result);
    else expectError(result, 'BadJson', TOO_DEEP);
  });

  it.each([
    ['pusher data', pusherWithData(`{"x": ${nested(3_100)}}`)],
    ['a rule condition', ruleWithCondition(`{"kind": "x", "v": ${nested(3_100)}}`)],
    ['a tweak value', actionsWithTweak(nested(3_100))],
    ['the whole body', nested(3_100)],
    ['a body that is not JSON either', `{"op": ${nested(3_100)}`],
  ])('%s nested 3,100 deep (a ~7 KB body) is answered, not thrown', (_case, text) => {
    expect(text.length).toBeLessThan(LIMIT.maxRequestBytes);
    expectError(parseRequest(encode(text), LIMIT), 'BadJson', TOO_DEEP);
  });

  it('follows the configured limit', () => {
    const text = pusherWithData(`{"x": ${nested(10)}}`);
    expectOk(parseRequest(encode(text), { ...LIMIT, maxJsonDepth: 13 }));
    expectError(
      parseRequest(encode(text), { ...LIMIT, maxJsonDepth: 12 }),
      'BadJson',
      'Request body nests arrays and objects deeper than 12 levels.',
    );
  });
});

describe('parsing requests: keys that reach a prototype (BadJson naming the key path)', () => {
  const before = prototypeKeys();

  it.each(POISONED_CASES)('%s with a key %s', (_place, key, place) => {
    const text = place.request(ALICE, key);
    expect(() => JSON.parse(text) as unknown).not.toThrow();
    expectError(parseRequest(encode(text), LIMIT), 'BadJson', forbiddenKeyMessage(place.requestPath(key)));
    expectCleanPrototype(before);
  });

  it.each([
    [
      'a key spelled with an escape',
      `{"op": "get_pushers", "user_id": "${ALICE}", "x": {"__pro\\u0074o__": 1}}`,
      'x.__proto__',
    ],
    [
      'the first of several, in document order',
      `{"op": "get_pushers", "user_id": "${ALICE}", "a": [{"b": {"constructor": {"prototype": 1}}}]}`,
      'a.0.b.constructor',
    ],
    [
      'a key inside an array of an unknown field',
      `{"op": "get_pushers", "user_id": "${ALICE}", "x": [[{"prototype": null}]]}`,
      'x.0.0.prototype',
    ],
  ])('%s', (_case, text, path) => {
    expectError(parse(text), 'BadJson', forbiddenKeyMessage(path));
    expectCleanPrototype(before);
  });

  it.each(['__proto__', 'constructor', 'prototype'])('%s as a value, or inside a longer key, is fine', (word) => {
    expectOk(parse(`{"op": "get_pushers", "user_id": "${ALICE}", "x": {"${word}x": "${word}", "k": ["${word}"]}}`));
  });
});
