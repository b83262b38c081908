/**
 * Whether two JSON values are equal as JSON: objects with the same members
 * whatever their order, arrays with equal items in the same order, equal
 * primitives. A member whose value is `undefined` counts as absent, as it
 * does in JSON text.
 *
 * It stops at the first difference, and at a reference both sides share:
 * an edited ruleset shares every rule it did not touch with the one it came
 * from, so comparing the two costs about as much as the rules that changed.
 *
 * Defined for values that came from JSON or are built of JSON values.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => jsonEqual(item, b[i]));
  }
  const left = a as Readonly<Record<string, unknown>>;
  const right = b as Readonly<Record<string, unknown>>;
  const keys = definedKeys(left);
  if (keys.length !== definedKeys(right).length) return false;
  return keys.every((key) => Object.hasOwn(right, key) && jsonEqual(left[key], right[key]));
}

function definedKeys(object: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(object).filter((key) => object[key] !== undefined);
}
