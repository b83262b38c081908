import type { JsonValue } from './json.js';

/** One value of a JSON document, where it sits. */
export interface JsonNode {
  readonly value: JsonValue;
  /** Dotted path of the value, e.g. `rule.conditions.0.pattern`; `''` for the root. */
  readonly path: string;
  /** The object key the value sits under; `undefined` for the root and for array items. */
  readonly key: string | undefined;
  /** Path of the array or object holding the value. */
  readonly parentPath: string;
}

/**
 * Visits every value of `root` in document order (a container before its
 * members) and returns the first answer `visit` gives that is not
 * `undefined`. Iterative, with its own stack: however deep the document,
 * the call stack stays flat.
 */
export function findInJson<T>(root: JsonValue, visit: (node: JsonNode) => T | undefined): T | undefined {
  const stack: JsonNode[] = [{ value: root, path: '', key: undefined, parentPath: '' }];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    const found = visit(node);
    if (found !== undefined) return found;
    const { value, path } = node;
    if (typeof value !== 'object' || value === null) continue;
    // Pushed last to first, so that the first member is popped first.
    if (Array.isArray(value)) {
      // `isArray` forgets the element type of a readonly array.
      const items = value as readonly JsonValue[];
      for (let index = items.length - 1; index >= 0; index -= 1) {
        stack.push({
          value: items[index] as JsonValue,
          path: joinPath(path, String(index)),
          key: undefined,
          parentPath: path,
        });
      }
    } else {
      const entries = Object.entries(value);
      for (let index = entries.length - 1; index >= 0; index -= 1) {
        const [key, member] = entries[index] as [string, JsonValue];
        stack.push({ value: member, path: joinPath(path, key), key, parentPath: path });
      }
    }
  }
  return undefined;
}

/** `a.b` under `a`; `b` at the root. */
export function joinPath(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}
