import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../src/matrix/json-depth.js';

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

/** The nesting depth of a parsed value, the way the scan counts it. */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const members: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...members.map(depthOf));
}

describe('nestsDeeperThan: the depth limit, without parsing', () => {
  it.each([
    ['a scalar', '"text"', 0, false],
    ['an empty object at the limit', '{}', 1, false],
    ['an empty object over the limit', '{}', 0, true],
    ['arrays at the limit', '[[[]]]', 3, false],
    ['arrays over the limit', '[[[]]]', 2, true],
    ['objects and arrays mixed, at the limit', '{"a": [{"b": [1]}], "c": {}}', 4, false],
    ['objects and arrays mixed, over the limit', '{"a": [{"b": [1]}], "c": {}}', 3, true],
    ['siblings do not add up', '[[], [], [[]], []]', 3, false],
    ['brackets inside a string', '{"a": "[[[[{{{{"}', 1, false],
    ['brackets inside a key', '{"[[[[": 1}', 1, false],
    ['an escaped quote does not end the string', '{"a": "\\"[[[[", "b": "]]]]\\""}', 1, false],
    ['an escaped quote in a key', '{"a\\"[[[[": 1}', 1, false],
    ['an escaped backslash before the closing quote', '["\\\\", [[[]]]]', 3, true],
    ['an escaped backslash, at the limit', '["\\\\", [[[]]]]', 4, false],
    ['a quote written as \\u0022 does not end the string', '["\\u0022[[[["]', 1, false],
    ['non-ASCII text around the brackets', '{"é😀": ["ü", ["ß"]]}', 3, false],
    ['stray closers buy no room for deeper nesting', ']]]]]][[[', 2, true],
    ['text that is not JSON, shallow', '{"op": ', 1, false],
    ['a 3,100-deep array', nested(3_100), 32, true],
    ['a 100,000-deep array', nested(100_000), 32, true],
  ])('%s (limit %i) → %s', (_case, text, max, deeper) => {
    expect(nestsDeeperThan(text, max)).toBe(deeper);
  });

  it('agrees with the depth of every JSON document at and just below it', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const text = JSON.stringify(value);
        const depth = depthOf(value);
        expect(nestsDeeperThan(text, depth)).toBe(false);
        if (depth > 0) expect(nestsDeeperThan(text, depth - 1)).toBe(true);
      }),
    );
  });
});
