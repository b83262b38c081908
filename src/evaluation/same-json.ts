import { isJsonObject, type JsonValue } from '../matrix/json.js';

/** Deep equality of JSON values; object key order does not matter. */
export function sameJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    const left = a as readonly JsonValue[];
    const right = b as readonly JsonValue[];
    return left.every((item, i) => sameJson(item, right[i]));
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]));
}
