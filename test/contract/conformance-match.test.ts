import { describe, expect, it } from 'vitest';
import { containsMatcher, mismatches, type MatchMode } from '../support/conformance-match.js';
import { fill, placeholdersOf } from '../support/conformance-template.js';

/** How the conformance runner holds a reply to a case (contract/schemas/conformance-case.schema.json). */
describe('matching a reply to what a case expects', () => {
  const ANY = { $match: 'any' };

  it.each<[string, MatchMode, unknown, unknown, string[]]>([
    ['equal values', 'exact', { ok: true, body: { a: [1, 'x', null] } }, { body: { a: [1, 'x', null] }, ok: true }, []],
    [
      'a different value, by path',
      'exact',
      { body: { a: [1, 2] } },
      { body: { a: [1, 3] } },
      ['body.a[1]: expected 2, got 3'],
    ],
    ['a key the reply lacks', 'subset', { body: { a: 1 } }, { body: {} }, ['body.a: missing']],
    ['a key more, exact', 'exact', { body: {} }, { body: { ts: 5 } }, ['body.ts: not expected, got 5']],
    ['a key more, subset', 'subset', { body: {} }, { body: { ts: 5 } }, []],
    ['arrays of another length, even in subset', 'subset', [1], [1, 2], ['(reply): expected 1 items, got 2: [1,2]']],
    ['array items held as subsets', 'subset', [{ rule_id: 'a' }], [{ rule_id: 'a', actions: [] }], []],
    [
      'array order',
      'exact',
      ['a', 'b'],
      ['b', 'a'],
      ['(reply)[0]: expected "a", got "b"', '(reply)[1]: expected "b", got "a"'],
    ],
    ['any value where a matcher is', 'exact', { ts: ANY }, { ts: 1234 }, []],
    ['a matcher needs the key', 'exact', { ts: ANY }, {}, ['ts: missing']],
    ['an object for an array', 'exact', { a: [] }, { a: {} }, ['a: expected an array, got {}']],
    ['null for an object', 'exact', { a: {} }, { a: null }, ['a: expected an object, got null']],
  ])('%s (%s)', (_what, mode, expected, actual, problems) => {
    expect(mismatches(expected, actual, mode)).toEqual(problems);
  });

  it('tells an expected reply with a matcher anywhere from a whole reply', () => {
    expect(containsMatcher({ ok: false, error: { kind: 'BadJson', error: ANY } })).toBe(true);
    expect(containsMatcher({ ok: true, body: [{ a: [ANY] }] })).toBe(true);
    expect(containsMatcher({ ok: true, body: { $match: 'all' } })).toBe(false);
  });
});

describe("filling a case's templates", () => {
  const bindings = { alice: '@alice-1:example.org', case: 'run1', gateway: 'http://127.0.0.1:9/x' };

  it('replaces placeholders in strings and keys, and expands $repeat', () => {
    expect(
      fill(
        {
          user_id: '{{alice}}',
          notify: { '{{alice}}': ['notify'] },
          key: '{{case}}-phone',
          long: { $repeat: 'ab', times: 3 },
        },
        bindings,
      ),
    ).toEqual({
      user_id: '@alice-1:example.org',
      notify: { '@alice-1:example.org': ['notify'] },
      key: 'run1-phone',
      long: 'ababab',
    });
  });

  it('keeps a __proto__ key a key of its own, as JSON has it', () => {
    const value = fill(JSON.parse('{"data": {"__proto__": {"polluted": "yes"}}}'), bindings) as { data: object };
    expect(Object.keys(value.data)).toEqual(['__proto__']);
    expect(JSON.stringify(value)).toBe('{"data":{"__proto__":{"polluted":"yes"}}}');
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('refuses a placeholder bound to nothing', () => {
    expect(() => fill({ user_id: '{{bob}}' }, bindings)).toThrow('{{bob}} names nothing this case binds');
  });

  it('finds every placeholder a case uses', () => {
    expect([...placeholdersOf({ a: ['{{alice}} and {{bob}}'], '{{case}}': 1 })].sort()).toEqual([
      'alice',
      'bob',
      'case',
    ]);
  });
});
