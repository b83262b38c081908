import type { JsonValue } from '../matrix/json.js';

/**
 * Rough V8 heap sizes (64-bit, pointer compression off: the worst case),
 * for estimating what a compiled ruleset holds. They are estimates to bound
 * a cache by, not measurements: the kernel benchmark compares the sum of
 * estimates with the measured heap growth of compiling its rows.
 */
export const OBJECT_BYTES = 56;
/** A closure with its context of a few captured variables. */
export const CLOSURE_BYTES = 96;
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
    return (value as readonly JsonValue[]).reduce<number>((sum, item) => sum + POINTER_BYTES + jsonBytes(item), ARRAY_BYTES);
  }
  return Object.entries(value).reduce<number>(
    (sum, [key, item]) => sum + POINTER_BYTES * 2 + stringBytes(key) + jsonBytes(item),
    OBJECT_BYTES,
  );
}
