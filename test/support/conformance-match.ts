/**
 * How a reply is held to a conformance case's expected reply
 * (contract/schemas/conformance-case.schema.json, `match`): `exact`, equal
 * as JSON values; `subset`, the expected keys present and matching, more
 * allowed; arrays in order and of the same length either way;
 * `{"$match": "any"}` matches any value.
 */
export type MatchMode = 'exact' | 'subset';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function isAnyMatcher(value: unknown): boolean {
  return isObject(value) && Object.keys(value).length === 1 && value['$match'] === 'any';
}

const shown = (value: unknown): string => {
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
};

/** Where and how `actual` differs from `expected`: empty when it matches. Paths as `body.global.override[2]`. */
export function mismatches(expected: unknown, actual: unknown, mode: MatchMode, path = '(reply)'): string[] {
  if (isAnyMatcher(expected)) return [];
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${path}: expected an array, got ${shown(actual)}`];
    if (actual.length !== expected.length)
      return [`${path}: expected ${expected.length} items, got ${actual.length}: ${shown(actual)}`];
    return expected.flatMap((item, i) => mismatches(item, actual[i], mode, `${path}[${i}]`));
  }
  if (isObject(expected)) {
    if (!isObject(actual)) return [`${path}: expected an object, got ${shown(actual)}`];
    const inner = (key: string) => (path === '(reply)' ? key : `${path}.${key}`);
    const problems = Object.entries(expected).flatMap(([key, item]) =>
      Object.hasOwn(actual, key) ? mismatches(item, actual[key], mode, inner(key)) : [`${inner(key)}: missing`],
    );
    if (mode === 'exact')
      for (const key of Object.keys(actual))
        if (!Object.hasOwn(expected, key)) problems.push(`${inner(key)}: not expected, got ${shown(actual[key])}`);
    return problems;
  }
  return expected === actual ? [] : [`${path}: expected ${shown(expected)}, got ${shown(actual)}`];
}

/** Whether a matcher stands anywhere in `expected`: then it is no reply a schema could check. */
export function containsMatcher(expected: unknown): boolean {
  if (isAnyMatcher(expected)) return true;
  if (Array.isArray(expected)) return expected.some(containsMatcher);
  return isObject(expected) && Object.values(expected).some(containsMatcher);
}
