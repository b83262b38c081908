import { describe, expect, it } from 'vitest';
import { isSmallEvaluate } from '../../src/consumer/small-evaluate.js';

const bounds = { maxBytes: 2048, maxRecipients: 3 };
const recipients = (count: number) => Array.from({ length: count }, (_, i) => ({ user_id: `@u${i}:example.org` }));
const anEvaluate = (count: number, content: object = { body: 'hi' }) =>
  JSON.stringify({
    op: 'evaluate',
    event: { type: 'm.room.message', sender: '@s:example.org', content },
    room: { member_count: count + 1 },
    recipients: recipients(count),
  });
const bytes = (text: string) => new TextEncoder().encode(text);

describe('isSmallEvaluate: whether a raw evaluate body is evaluated on the event loop', () => {
  it.each([
    ['no recipients', anEvaluate(0), true],
    ['one recipient', anEvaluate(1), true],
    ['as many recipients as the bound', anEvaluate(3), true],
    ['one recipient more than the bound', anEvaluate(4), false],
    ['many recipients', anEvaluate(50), false],
    ['a body over the byte bound, one recipient', anEvaluate(1, { body: 'x'.repeat(2100) }), false],
    ['whitespace around the key', '{"recipients":[{ "user_id" : "@a:b" },\n{"user_id":"@c:d"}]}', true],
    // Counted too: safe, the request goes to a thread.
    ['a "user_id" key inside the event', anEvaluate(3, { user_id: '@x:example.org' }), false],
    // Escaped quotes inside a string are not a key.
    ['"user_id" as text in the event', anEvaluate(3, { body: 'my "user_id" is' }), true],
    // A key spelled with an escape is missed by the byte search: any `\u` goes to a thread.
    ['"user\\u005fid" keys', anEvaluate(50).replaceAll('"user_id"', '"user\\u005fid"'), false],
    ['a "\\u" anywhere, one recipient', anEvaluate(1, { body: 'caf\u00e9' }).replace('\u00e9', '\\u00e9'), false],
  ])('%s: %s', (_case, body, small) => {
    expect(isSmallEvaluate(bytes(body), bounds)).toBe(small);
  });

  const grouped = (localparts: string[], displayNames?: string[]) =>
    JSON.stringify({
      op: 'evaluate',
      event: { type: 'm.room.message', sender: '@s:example.org', content: { body: 'hi' } },
      room: { member_count: 9 },
      recipients_by_server: [
        { server: 'example.org', localparts, ...(displayNames === undefined ? {} : { display_names: displayNames }) },
      ],
    });

  // The grouped form counts every string after its key: here "server", the
  // server, "localparts" and each localpart (and display names, and their key).
  it.each([
    ['two localparts: 5 strings', grouped(['a', 'b']), true],
    ['three localparts: 6 strings', grouped(['a', 'b', 'c']), true],
    ['four localparts: 7 strings', grouped(['a', 'b', 'c', 'd']), false],
    ['two localparts with display names: 8 strings', grouped(['a', 'b'], ['A', 'B']), false],
    [
      '"user_id" keys and grouped strings add up: 1 + 6',
      `{"recipients":[{"user_id":"@a:b"}],${grouped(['a', 'b', 'c']).slice(1)}`,
      false,
    ],
    ['the grouped key only as text in the event', anEvaluate(1, { body: 'my "recipients_by_server" is' }), true],
  ])('grouped form, maxRecipients 6: %s', (_case, body, small) => {
    expect(isSmallEvaluate(bytes(body), { maxBytes: 2048, maxRecipients: 6 })).toBe(small);
  });

  it.each([
    ['maxRecipients 0', { maxBytes: 2048, maxRecipients: 0 }],
    ['maxBytes 0', { maxBytes: 0, maxRecipients: 3 }],
  ])('with %s, no body is small, not even an empty one', (_case, off) => {
    expect(isSmallEvaluate(bytes(anEvaluate(1)), off)).toBe(false);
    expect(isSmallEvaluate(new Uint8Array(0), off)).toBe(false);
  });

  it('reads only the bytes of its view, as a delivery may be a slice of a larger buffer', () => {
    const whole = bytes(`${anEvaluate(2)}${anEvaluate(40)}`);
    const first = whole.subarray(0, bytes(anEvaluate(2)).byteLength);
    expect(isSmallEvaluate(first, bounds)).toBe(true);
    expect(isSmallEvaluate(whole.subarray(first.byteLength), { ...bounds, maxBytes: 1 << 20 })).toBe(false);
  });
});
