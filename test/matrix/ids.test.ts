import { describe, expect, it } from 'vitest';
import { isValidRoomId } from '../../src/matrix/room-id.js';
import fc from 'fast-check';
import { isValidUserId, userIdValidator } from '../../src/matrix/user-id.js';

describe('Matrix user IDs', () => {
  it.each([
    '@alice:example.org',
    '@alice:example.org:8448',
    '@a.b_c=d-e/f+1:matrix.org',
    '@Historical!Name:example.org',
    '@bob:127.0.0.1',
    '@bob:[::1]:8448',
    `@${'a'.repeat(240)}:example.org`,
  ])('accepts %s', (id) => {
    expect(isValidUserId(id)).toBe(true);
    expect(userIdValidator()(id)).toBe(true);
  });

  it.each([
    ['no sigil', 'alice:example.org'],
    ['wrong sigil', '!alice:example.org'],
    ['no server', '@alice'],
    ['empty localpart', '@:example.org'],
    ['empty server', '@alice:'],
    ['space in localpart', '@al ice:example.org'],
    ['non-ASCII localpart', '@alicé:example.org'],
    ['bad port', '@alice:example.org:http'],
    ['bad server chars', '@alice:exa_mple.org'],
    ['unclosed IPv6', '@alice:[::1'],
    ['over 255 bytes', `@${'a'.repeat(250)}:example.org`],
    ['over 255 bytes of UTF-8 in fewer than 255 units', `@${'a'.repeat(80)}:${'é'.repeat(90)}`],
  ])('rejects %s', (_case, id) => {
    expect(isValidUserId(id)).toBe(false);
    expect(userIdValidator()(id)).toBe(false);
  });

  it('userIdValidator, which remembers server names, answers as isValidUserId for any list of IDs', () => {
    const server = fc.constantFrom('example.org', 'exa_mple.org', '[::1]:8448', '[::1', 'example.org:http', '');
    const localpart = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('a'.repeat(250), 'alice', 'é'));
    const id = fc.tuple(fc.constantFrom('@', '!', ''), localpart, server).map(([s, l, h]) => `${s}${l}:${h}`);
    fc.assert(
      fc.property(fc.array(id, { maxLength: 20 }), (ids) => {
        const validate = userIdValidator();
        for (const userId of ids) expect(validate(userId)).toBe(isValidUserId(userId));
      }),
    );
  });
});

describe('Matrix room IDs', () => {
  it.each(['!abc:example.org', '!abc:example.org:8448', '!Xy_-12AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab'])(
    'accepts %s',
    (id) => {
      expect(isValidRoomId(id)).toBe(true);
    },
  );

  it.each(['abc:example.org', '!', '!:example.org', '!abc:', '#alias:example.org', '!a b:example.org'])(
    'rejects %s',
    (id) => {
      expect(isValidRoomId(id)).toBe(false);
    },
  );
});
