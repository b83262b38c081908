import { isJsonObject, type JsonObject, type JsonValue } from '../matrix/json.js';

/** A condition's dotted key, split once when its rule is compiled. */
export type KeyPath = readonly string[];

/**
 * Splits a dotted key into property names. `\.` is a literal dot and `\\` a
 * literal backslash; a backslash before any other character is kept as a
 * backslash (`m\x` names `m\x`). That last point departs from Synapse,
 * which drops such keys (docs/push-rules.md#evaluation).
 */
export function parseKeyPath(key: string): KeyPath {
  const segments: string[] = [];
  // Unescaped runs are sliced rather than built a character at a time, so
  // that each name is one flat string: it is used as a property key on
  // every lookup and kept for the life of the compiled rule.
  let escaped = '';
  let runStart = 0;
  for (let i = 0; i < key.length; i += 1) {
    const character = key.charAt(i);
    if (character === '\\') {
      const next = key.charAt(i + 1);
      if (next === '.' || next === '\\') {
        escaped += key.slice(runStart, i) + next;
        i += 1;
        runStart = i + 1;
      }
    } else if (character === '.') {
      segments.push(escaped + key.slice(runStart, i));
      escaped = '';
      runStart = i + 1;
    }
  }
  segments.push(escaped + key.slice(runStart));
  return segments;
}

/**
 * The value at `path`, or `undefined` when the path leads nowhere or through
 * something that is not an object (arrays included). Only own properties
 * count: `constructor` or `__proto__` must not reach `Object.prototype`.
 */
export function valueAtPath(root: JsonObject, path: KeyPath): JsonValue | undefined {
  let node: JsonValue = root;
  for (const segment of path) {
    if (!isJsonObject(node) || !Object.hasOwn(node, segment)) return undefined;
    const child: JsonValue | undefined = node[segment];
    if (child === undefined) return undefined;
    node = child;
  }
  return node;
}
