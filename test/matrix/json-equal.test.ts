import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonEqual } from '../../src/matrix/json-equal.js';

/** A copy with the keys of every object sorted, so that equal values have equal texts. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([k, v]) => [k, sortedKeys(v)]),
  );
}

/** The same value with the keys of every object in reverse order. */
function reversedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversedKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([k, v]) => [k, reversedKeys(v)]),
  );
}

const canonicallyEqual = (a: unknown, b: unknown) => JSON.stringify(sortedKeys(a)) === JSON.stringify(sortedKeys(b));

describe('jsonEqual: equality of JSON values', () => {
  it.each([
    ['equal strings', 'a', 'a', true],
    ['a number and its text', 1, '1', false],
    ['null and an empty object', null, {}, false],
    ['an array and an object with index keys', ['x'], { 0: 'x' }, false],
    ['arrays of different lengths', [1, 2], [1], false],
    ['the same items in another order', [1, 2], [2, 1], false],
    ['the same members in another order', { a: 1, b: [2] }, { b: [2], a: 1 }, true],
    ['a member holding undefined, and no member', { a: 1, b: undefined }, { a: 1 }, true],
    ['as many members, different names', { a: 1 }, { b: 1 }, false],
    ['a nested difference', { a: [{ b: { c: 1 } }] }, { a: [{ b: { c: 2 } }] }, false],
    ['nested equality', { a: [{ b: { c: 1 } }] }, { a: [{ b: { c: 1 } }] }, true],
  ])('%s', (_name, a, b, expected) => {
    expect(jsonEqual(a, b)).toBe(expected);
    expect(jsonEqual(b, a)).toBe(expected);
  });

  it('agrees with comparing key-sorted JSON texts, on any two values, a copy, and a copy with keys reordered', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        expect(jsonEqual(a, b)).toBe(canonicallyEqual(a, b));
        expect(jsonEqual(a, structuredClone(a))).toBe(true);
        expect(jsonEqual(a, reversedKeys(a))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
