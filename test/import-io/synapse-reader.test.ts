import { describe, expect, it } from 'vitest';
import { compareUserIds, orderedRows } from '../../src/import-io/synapse-reader.js';

describe('compareUserIds', () => {
  it.each([
    ['@a:x', '@b:x', -1],
    ['@b:x', '@a:x', 1],
    ['@a:x', '@a:x', 0],
    ['@A:x', '@a:x', -1],
    // UTF-8 bytes, not UTF-16 code units: U+FF5E (EF BD 9E) before U+1F600 (F0 9F 98 80).
    ['@\uff5e:x', '@\u{1f600}:x', -1],
  ])('%s against %s is %i', (a, b, sign) => {
    expect(Math.sign(compareUserIds(a, b))).toBe(sign);
  });
});

describe('orderedRows', () => {
  it('hands out each stretch up to a user, keeping the row past it for the next, across fetched chunks', async () => {
    const chunks = [
      [{ user_name: '@a:x' }, { user_name: '@a:x' }],
      [{ user_name: '@c:x' }],
      [{ user_name: '@d:x' }],
      [],
    ];
    let fetched = 0;
    let closed = false;
    const rows = orderedRows(
      async () => Promise.resolve(chunks[fetched++] ?? []),
      async () => {
        closed = true;
        await Promise.resolve();
      },
    );
    expect(await rows.upTo('@b:x')).toEqual([{ user_name: '@a:x' }, { user_name: '@a:x' }]);
    expect(await rows.upTo('@b:x')).toEqual([]);
    expect(await rows.upTo('@c:x')).toEqual([{ user_name: '@c:x' }]);
    expect(await rows.upTo('@z:x')).toEqual([{ user_name: '@d:x' }]);
    expect(await rows.upTo('@z:x')).toEqual([]);
    expect(fetched).toBe(4);
    await rows.close();
    expect(closed).toBe(true);
  });
});
