import type { JsonValue } from '../matrix/json.js';

/**
 * Rough V8 heap sizes (64-bit, no pointer compression, as Node ships), for
 * estimating what a compiled ruleset holds. They are estimates to bound a
 * cache by, calibrated on Node 20 by compiling thousands of copies of small
 * rulesets and reading the heap growth; the kernel benchmark prints the
 * estimate next to the measured growth for its rows.
 */
export const OBJECT_BYTES = 56;
/** A compiled ruleset with no rules: its object, the content index, two empty maps, four arrays. */
export const EMPTY_RULESET_BYTES = 640;
/** A compiled condition: its closure, the closure's context and its slot in the rule's array. */
export const CONDITION_BYTES = 440;
export const ARRAY_BYTES = 32;
export const POINTER_BYTES = 8;
/** Per entry of a Map, hash table included. */
export const MAP_ENTRY_BYTES = 48;

/** Latin-1 strings take a byte per character, others two; plus the header, rounded to 8. */
export function stringBytes(text: string): number {
  // eslint-disable-next-line no-control-regex
  const perCharacter = /[^\u0000-\u00ff]/.test(text) ? 2 : 1;
  return 16 + Math.ceil((text.length * perCharacter) / 8) * 8;
}

export function jsonBytes(value: JsonValue): number {
  if (typeof value === 'string') return stringBytes(value);
  if (value === null || typeof value !== 'object') return POINTER_BYTES;
  if (Array.isArray(value)) {
    return (value as readonly JsonValue[]).reduce<number>(
      (sum, item) => sum + POINTER_BYTES + jsonBytes(item),
      ARRAY_BYTES,
    );
  }
  return Object.entries(value).reduce<number>(
    (sum, [key, item]) => sum + POINTER_BYTES * 2 + stringBytes(key) + jsonBytes(item),
    OBJECT_BYTES,
  );
}
