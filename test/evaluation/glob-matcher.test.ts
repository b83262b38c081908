import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../src/evaluation/bounded-cache.js';
import { FoldedText } from '../../src/evaluation/folded-text.js';
import { containsLiteralAtWordBoundaries, globMatcher, GlobMatcher } from '../../src/evaluation/glob-matcher.js';

const KELVIN = '\u212a';
const LONG_S = '\u017f';

const whole = (pattern: string, value: string) => new GlobMatcher(pattern).matchesWhole(new FoldedText(value));
const words = (pattern: string, value: string) =>
  new GlobMatcher(pattern).matchesAtWordBoundaries(new FoldedText(value));

describe('glob, whole value (every key but content.body)', () => {
  it.each([
    ['m.room.message', 'm.room.message', true],
    ['M.ROOM.MESSAGE', 'm.room.message', true],
    ['m.room.message', 'm.room.messages', false],
    ['m.room.message', 'xm.room.message', false],
    ['m.room.*', 'm.room.message', true],
    ['m.room.*', 'm.room.', true],
    ['m.room.*', 'm.room', false],
    ['*.message', 'm.room.message', true],
    ['m.*.message', 'm.room.message', true],
    ['m.*.message', 'm.message', false],
    ['*', '', true],
    ['**', 'anything', true],
    ['', '', true],
    ['', 'a', false],
    ['a*b*c', 'abbc', true],
    ['a*b*c', 'acb', false],
    ['*ab', 'aab', true],
    ['a*a', 'a', false],
    ['a*a', 'aa', true],
    ['?', 'x', true],
    ['?', '', false],
    ['?', 'xy', false],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    // `*` and `?` run across newlines.
    ['a*b', 'a\nb', true],
    ['a?b', 'a\nb', true],
    ['*', 'line one\nline two\r\n', true],
    // `?` is one code point, not one UTF-16 unit.
    ['?', '😀', true],
    ['??', '😀', false],
    ['a?b', 'a😀b', true],
    ['?', '𐐀', true],
    ['😀', '😀', true],
    // Unicode simple case folding on both sides.
    ['É', 'é', true],
    ['é', 'É', true],
    ['ÉCOLE', 'école', true],
    ['s', LONG_S, true],
    ['k', KELVIN, true],
    ['σ', 'ς', true],
    ['ΟΔΟΣ', 'οδος', true],
    ['𐐀', '𐐨', true],
    ['straße', 'STRASSE', false],
    ['i', 'İ', false],
    // A lone surrogate is one code point, never half of a pair.
    ['?', '\ud83d', true],
    ['\ud83d', '😀', false],
    ['\ud83d?', '😀', false],
    ['*\ude00', '😀', false],
    ['*\ude00', 'a\ude00', true],
  ])('%j against %j: %s', (pattern, value, expected) => {
    expect(whole(pattern, value)).toBe(expected);
  });
});

describe('glob at word boundaries (content.body)', () => {
  it.each([
    ['cake', 'I like cake', true],
    ['cake', 'cake', true],
    ['cake', 'CAKE!', true],
    ['cake', 'cakes', false],
    ['cake', 'pancake', false],
    ['cake', 'cake_shop', false],
    ['cake', 'cake2', false],
    ['cake', 'pancake or cake.', true],
    ['two words', 'say two words now', true],
    ['two words', 'say two wordsmith', false],
    ['#tag', 'a #tag here', true],
    ['#tag', 'a#tag', false],
    ['tag!', 'tag!x', false],
    ['tag!', 'tag! x', true],
    // Decided disagreement 1: every character outside [A-Za-z0-9_] is a boundary.
    ['猫', '我的猫很可爱', true],
    ['café', 'un café.', true],
    ['é', 'café', false],
    ['bob', 'é bob', true],
    ['bob', 'ébob', true],
    // ſ and the Kelvin sign fold to ASCII letters but are boundaries themselves.
    ['top', `${LONG_S}top`, true],
    ['stop', `${LONG_S}top`, true],
    ['elvin', `${KELVIN}elvin`, true],
    ['kelvin', `${KELVIN}elvin`, true],
    ['kelvin', `x${KELVIN}elvin`, false],
    ['foo*', 'foobar baz', true],
    ['foo*', 'xfoobar', false],
    ['*bar', 'foobar', true],
    ['*bar', 'foobarx', false],
    ['*bar', 'x foobarx bar', true],
    ['f?o', 'a fxo b', true],
    ['f?o', 'a fo b', false],
    ['w*d', 'word', true],
    ['w*d', 'wordy', false],
    ['w*d', 'wordy wood', true],
    ['w*d', 'a wo\nrd b', true],
    ['w?rd', 'w\nrd', true],
    ['*', '', true],
    ['*', 'anything', true],
    ['', '', true],
    ['', 'abc', false],
    ['', 'a b', false],
    ['', ' ', true],
    ['?', 'ab', false],
    ['?', 'a b', true],
    ['??', '😀', false],
    ['?', '😀', true],
    ['ab', 'ab😀', true],
    ['ÉCOLE', "l'école", true],
    ['a*b*c', 'x a b c', true],
    ['a*b*c', 'xa b c', false],
    ['a*b*c', 'x a b cx', false],
  ])('%j in %j: %s', (pattern, value, expected) => {
    expect(words(pattern, value)).toBe(expected);
  });

  it('stays linear on patterns that make a backtracking regex explode', () => {
    const body = 'a'.repeat(65_536);
    const started = performance.now();
    expect(words('*a*a*a*a*a*b', body)).toBe(false);
    expect(whole('*a*a*a*a*a*b', body)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('literal at word boundaries (contains_display_name)', () => {
  it.each([
    ['bob', 'hi Bob!', true],
    ['bob', 'hi bobby', false],
    ['b*b', 'hi bob', false],
    ['b*b', 'hi b*b', true],
    ['b?b', 'hi bob', false],
    ['alice smith', 'ping Alice Smith.', true],
  ])('%j in %j: %s', (literal, body, expected) => {
    expect(containsLiteralAtWordBoundaries(new FoldedText(body), literal)).toBe(expected);
  });
});

describe('matcher cache', () => {
  it('gives identical patterns one matcher', () => {
    expect(globMatcher('shared keyword')).toBe(globMatcher('shared keyword'));
  });

  it('knows a literal from a glob', () => {
    expect([globMatcher('cake').isLiteral, globMatcher('c*ke').isLiteral, globMatcher('c?ke').isLiteral]).toEqual([
      true,
      false,
      false,
    ]);
  });

  it('drops the least recently used entry beyond its capacity', () => {
    const cache = new BoundedCache<string, number>(2);
    let builds = 0;
    const get = (key: string) => cache.getOrCreate(key, () => (builds += 1));
    get('a');
    get('b');
    get('a');
    get('c'); // evicts b, the least recently used
    expect(cache.size).toBe(2);
    get('a');
    expect(builds).toBe(3);
    get('b');
    expect(builds).toBe(4);
  });
});
