import { describe, expect, it } from 'vitest';
import { groupRecipientsByServer } from '../../src/client/group-recipients.js';

describe('groupRecipientsByServer: the grouped form of evaluate recipients', () => {
  it.each([
    ['no recipients', [], []],
    [
      'one server, list order kept, no display names',
      [{ user_id: '@b:x.org' }, { user_id: '@a:x.org' }],
      [{ server: 'x.org', localparts: ['b', 'a'] }],
    ],
    [
      'servers in the order of their first recipient',
      [{ user_id: '@a:y.org' }, { user_id: '@b:x.org' }, { user_id: '@c:y.org' }],
      [
        { server: 'y.org', localparts: ['a', 'c'] },
        { server: 'x.org', localparts: ['b'] },
      ],
    ],
    [
      'display names in a group where one has any, null for the others, before and after',
      [{ user_id: '@a:x.org' }, { user_id: '@b:x.org', display_name: 'Bee' }, { user_id: '@c:x.org' }],
      [{ server: 'x.org', localparts: ['a', 'b', 'c'], display_names: [null, 'Bee', null] }],
    ],
    [
      'an empty display name is kept',
      [{ user_id: '@a:x.org', display_name: '' }],
      [{ server: 'x.org', localparts: ['a'], display_names: [''] }],
    ],
    [
      'a port is part of the server; the localpart ends at the first colon',
      [{ user_id: '@a:x.org:8448' }, { user_id: '@a:x.org' }],
      [
        { server: 'x.org:8448', localparts: ['a'] },
        { server: 'x.org', localparts: ['a'] },
      ],
    ],
    [
      'invalid IDs are grouped as they are (the worker refuses them)',
      [{ user_id: '@:x.org' }, { user_id: '@a b:' }],
      [
        { server: 'x.org', localparts: [''] },
        { server: '', localparts: ['a b'] },
      ],
    ],
  ])('%s', (_case, recipients, groups) => {
    expect(groupRecipientsByServer(recipients)?.groups).toEqual(groups);
  });

  it.each([
    ['one server: the list itself', ['@a:x.org', '@b:x.org'], ['@a:x.org', '@b:x.org']],
    ['servers interleaved: group by group', ['@a:y.org', '@b:x.org', '@c:y.org'], ['@a:y.org', '@c:y.org', '@b:x.org']],
  ])('the order the groups name the recipients in, which reply runs count in: %s', (_case, userIds, expected) => {
    const recipients = userIds.map((user_id) => ({ user_id }));
    const grouped = groupRecipientsByServer(recipients);
    expect(grouped?.order.map((r) => r.user_id)).toEqual(expected);
    if (expected === userIds) expect(grouped?.order).toBe(recipients);
  });

  it.each([
    ['no sigil', 'a:x.org'],
    ['another sigil', '!a:x.org'],
    ['no colon', '@a'],
    ['empty', ''],
  ])('gives up on a user ID with %s: the plain list goes instead', (_case, userId) => {
    expect(groupRecipientsByServer([{ user_id: '@ok:x.org' }, { user_id: userId }])).toBeUndefined();
  });
});
