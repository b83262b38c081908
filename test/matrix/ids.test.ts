import { describe, expect, it } from 'vitest';
import { isValidRoomId } from '../../src/matrix/room-id.js';
import { isValidUserId } from '../../src/matrix/user-id.js';

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
  ])('rejects %s', (_case, id) => {
    expect(isValidUserId(id)).toBe(false);
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
