/**
 * A conformance case's templates filled in for one run of it
 * (contract/schemas/conformance-case.schema.json): `{{name}}` in strings
 * and object keys, and `{"$repeat": text, "times": n}` values.
 */

const PLACEHOLDER = /\{\{([a-z][a-z0-9]*)\}\}/g;

/** What each placeholder stands for in one run: user names, `case` and `gateway`. */
export type Bindings = Readonly<Record<string, string>>;

interface Repeat {
  readonly $repeat: string;
  readonly times: number;
}

function isRepeat(value: object): value is Repeat {
  const keys = Object.keys(value);
  const { $repeat, times } = value as Partial<Repeat>;
  return (
    keys.length === 2 &&
    typeof $repeat === 'string' &&
    typeof times === 'number' &&
    Number.isInteger(times) &&
    times >= 0
  );
}

function fillText(text: string, bindings: Bindings): string {
  return text.replace(PLACEHOLDER, (whole, name: string) => {
    const value = bindings[name];
    if (value === undefined) throw new Error(`${whole} names nothing this case binds`);
    return value;
  });
}

/** `value` with every placeholder replaced and every `$repeat` expanded; throws on a placeholder not bound. */
export function fill(value: unknown, bindings: Bindings): unknown {
  if (typeof value === 'string') return fillText(value, bindings);
  if (Array.isArray(value)) return value.map((item) => fill(item, bindings));
  if (typeof value !== 'object' || value === null) return value;
  if (isRepeat(value)) return value.$repeat.repeat(value.times);
  // Built key by key: a key `__proto__` (a case may send one, to be refused) stays an own key.
  const filled: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value))
    Object.defineProperty(filled, fillText(key, bindings), {
      value: fill(item, bindings),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return filled;
}

/** Every placeholder name `value` uses, in strings and keys. */
export function placeholdersOf(value: unknown, found = new Set<string>()): Set<string> {
  const scan = (text: string) => {
    for (const match of text.matchAll(PLACEHOLDER)) found.add(match[1] as string);
  };
  if (typeof value === 'string') scan(value);
  else if (Array.isArray(value)) for (const item of value) placeholdersOf(item, found);
  else if (typeof value === 'object' && value !== null)
    for (const [key, item] of Object.entries(value)) {
      scan(key);
      placeholdersOf(item, found);
    }
  return found;
}
