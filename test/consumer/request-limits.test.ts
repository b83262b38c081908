import { describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/matrix/json.js';
import { checkRequestLimits } from '../../src/consumer/request-limits.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { expectError, expectOk } from '../support/expect-result.js';

/** `value` inside `levels` arrays, built without recursion. */
function buried(value: JsonValue, levels: number): JsonValue {
  let current = value;
  for (let i = 0; i < levels; i += 1) current = [current];
  return current;
}

describe('checkRequestLimits walks the request without recursion', () => {
  // Parsing bounds the depth first (limits.maxJsonDepth); the walk must not
  // depend on it: 100,000 levels would overflow any recursive walk.
  const command = { op: 'get_pushers', userId: ALICE } as const;

  it.each([
    ['a short string', 'fine', undefined],
    ['a long string', 'x'.repeat(DEFAULT_LIMITS.maxStringBytes + 1), /^data(\.0){100000} is longer than 4096 bytes\.$/],
    [
      'a long key',
      { ['k'.repeat(DEFAULT_LIMITS.maxStringBytes + 1)]: 1 },
      /^A key in data(\.0){100000} is longer than 4096 bytes\.$/,
    ],
  ])('%s 100,000 levels down', (_case, leaf, message) => {
    const raw = { op: 'get_pushers', user_id: ALICE, data: buried(leaf, 100_000) };
    const result = checkRequestLimits(raw, command, DEFAULT_LIMITS);
    if (message === undefined) expectOk(result);
    else expectError(result, 'InvalidParam', message);
  });

  it('names the first long string in document order', () => {
    const long = 'x'.repeat(DEFAULT_LIMITS.maxStringBytes + 1);
    const raw = { a: [{ b: 'ok' }, { c: long }], d: long };
    expectError(checkRequestLimits(raw, command, DEFAULT_LIMITS), 'InvalidParam', 'a.1.c is longer than 4096 bytes.');
    expect(checkRequestLimits({ a: ['ok'] }, command, DEFAULT_LIMITS).ok).toBe(true);
  });
});
