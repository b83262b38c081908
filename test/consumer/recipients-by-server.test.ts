import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isValidUserId } from '../../src/matrix/user-id.js';
import { toEvaluateCommand, type EvaluateLimits } from '../../src/consumer/evaluate-request.js';
import { expandRecipientsByServer, recipientsByServerCount } from '../../src/consumer/recipients-by-server.js';
import type { JsonObject } from '../../src/matrix/json.js';

const LIMITS: EvaluateLimits = {
  maxRequestBytes: 4096,
  maxJsonDepth: 8,
  maxEventBytes: 100,
  maxRecipients: 5,
  maxBatchEvents: 256,
  maxBatchRecipients: 20_000,
};
const EVENT = { type: 'm.room.message', room_id: '!r:x.org', sender: '@s:x.org', content: { body: 'hi' } };
const ROOM = { member_count: 3 };
const grouped = (recipientsByServer: unknown, extra: Record<string, unknown> = {}): JsonObject =>
  ({ op: 'evaluate', event: EVENT, room: ROOM, recipients_by_server: recipientsByServer, ...extra }) as JsonObject;

describe('expandRecipientsByServer: the recipients a grouped list stands for', () => {
  it.each([
    ['no groups', [], []],
    ['an empty group', [{ server: 'x.org', localparts: [] }], []],
    [
      'group by group, localparts in order',
      [
        { server: 'y.org', localparts: ['b', 'a'] },
        { server: 'x.org', localparts: ['c'] },
      ],
      [{ user_id: '@b:y.org' }, { user_id: '@a:y.org' }, { user_id: '@c:x.org' }],
    ],
    [
      'display names: a string is kept (empty too), null is none',
      [{ server: 'x.org', localparts: ['a', 'b', 'c'], display_names: ['Ann', null, ''] }],
      [
        { user_id: '@a:x.org', display_name: 'Ann' },
        { user_id: '@b:x.org' },
        { user_id: '@c:x.org', display_name: '' },
      ],
    ],
    [
      'a server with a port, an IPv6 literal, a historical localpart',
      [
        { server: 'x.org:8448', localparts: ['a'] },
        { server: '[::1]:8448', localparts: ['Old!Name'] },
      ],
      [{ user_id: '@a:x.org:8448' }, { user_id: '@Old!Name:[::1]:8448' }],
    ],
    [
      'the same server in two groups, different users',
      [
        { server: 'x.org', localparts: ['a'] },
        { server: 'x.org', localparts: ['b'] },
      ],
      [{ user_id: '@a:x.org' }, { user_id: '@b:x.org' }],
    ],
  ])('%s', (_case, groups, recipients) => {
    expect(expandRecipientsByServer(groups)).toEqual({ ok: true, value: recipients });
    expect(recipientsByServerCount(groups)).toBe(recipients.length);
  });
});

describe('expandRecipientsByServer: which parts make a valid user ID', () => {
  it.each([
    ['255 bytes', 248, true],
    ['256 bytes', 249, false],
  ])('the whole ID within 255 bytes: %s', (_case, length, valid) => {
    expect(expandRecipientsByServer([{ server: 'x.org', localparts: ['a'.repeat(length)] }]).ok).toBe(valid);
  });

  it('accepts exactly the parts isValidUserId accepts as one ID, for localparts without a colon', () => {
    const server = fc.constantFrom(
      'example.org',
      'exa_mple.org',
      '[::1]:8448',
      '[::1',
      'example.org:http',
      '',
      'x.org:8',
    );
    const localpart = fc
      .oneof(fc.string({ maxLength: 12 }), fc.constantFrom('a'.repeat(246), 'a'.repeat(250), 'alice', 'é', '"q\\'))
      .filter((text) => !text.includes(':'));
    fc.assert(
      fc.property(localpart, server, (l, h) => {
        expect(expandRecipientsByServer([{ server: h, localparts: [l] }]).ok).toBe(isValidUserId(`@${l}:${h}`));
      }),
    );
  });
});

describe('toEvaluateCommand with recipients_by_server', () => {
  it('gives the command the plain list would give, but for the grouped key it carries along', () => {
    const groups = [{ server: 'x.org', localparts: ['a', 'b'], display_names: ['A', null] }];
    const plain = toEvaluateCommand(
      {
        op: 'evaluate',
        event: EVENT,
        room: ROOM,
        recipients: [{ user_id: '@a:x.org', display_name: 'A' }, { user_id: '@b:x.org' }],
        explain: true,
      },
      LIMITS,
    );
    const fromGroups = toEvaluateCommand(grouped(groups, { explain: true }), LIMITS);
    expect(fromGroups).toEqual({
      ok: true,
      value: { op: 'evaluate', request: { ...(plain.ok ? plain.value.request : {}), recipients_by_server: groups } },
    });
  });

  it.each([
    [
      'neither form',
      { recipients_by_server: undefined },
      'BadJson',
      "request must have required property 'recipients'.",
    ],
    ['both forms', { recipients: [] }, 'BadJson', 'evaluate takes only one of recipients and recipients_by_server.'],
    ['not an array', { recipients_by_server: {} }, 'BadJson', 'recipients_by_server must be array.'],
    [
      'a group without server',
      { recipients_by_server: [{ localparts: [] }] },
      'BadJson',
      "recipients_by_server.0 must have required property 'server'.",
    ],
    [
      'a localpart that is not a string',
      { recipients_by_server: [{ server: 'x.org', localparts: [1] }] },
      'BadJson',
      'recipients_by_server.0.localparts.0 must be string.',
    ],
    [
      'a display name that is a number',
      { recipients_by_server: [{ server: 'x.org', localparts: ['a'], display_names: [1] }] },
      'BadJson',
      'recipients_by_server.0.display_names.0 must be string.',
    ],
    [
      'display names not one per localpart',
      { recipients_by_server: [{ server: 'x.org', localparts: ['a', 'b'], display_names: ['A'] }] },
      'BadJson',
      'recipients_by_server.0.display_names must have one entry per localpart.',
    ],
    [
      'a bad server',
      { recipients_by_server: [{ server: 'x_y.org', localparts: ['a'] }] },
      'BadJson',
      'recipients_by_server.0.server is not a valid server name.',
    ],
    [
      'a bad server, even in a group without localparts',
      { recipients_by_server: [{ server: '', localparts: [] }] },
      'BadJson',
      'recipients_by_server.0.server is not a valid server name.',
    ],
    [
      // As one string `@x.org:1:2` would be a valid ID (on server `1:2`), but not with these parts.
      'a localpart with a colon',
      { recipients_by_server: [{ server: '2', localparts: ['x.org:1'] }] },
      'BadJson',
      'recipients_by_server.0.localparts.0 does not make a valid Matrix user ID.',
    ],
    [
      'a localpart outside ASCII',
      { recipients_by_server: [{ server: 'x.org', localparts: ['é'] }] },
      'BadJson',
      'recipients_by_server.0.localparts.0 does not make a valid Matrix user ID.',
    ],
    [
      'a bad localpart',
      { recipients_by_server: [{ server: 'x.org', localparts: ['a', 'b c'] }] },
      'BadJson',
      'recipients_by_server.0.localparts.1 does not make a valid Matrix user ID.',
    ],
    [
      'an empty localpart',
      { recipients_by_server: [{ server: 'x.org', localparts: [''] }] },
      'BadJson',
      'recipients_by_server.0.localparts.0 does not make a valid Matrix user ID.',
    ],
    [
      'a user ID over 255 bytes',
      { recipients_by_server: [{ server: 'x.org', localparts: ['a'.repeat(250)] }] },
      'BadJson',
      'recipients_by_server.0.localparts.0 does not make a valid Matrix user ID.',
    ],
    [
      'a user twice in a group',
      { recipients_by_server: [{ server: 'x.org', localparts: ['a', 'a'] }] },
      'BadJson',
      'recipients_by_server.0.localparts.1 repeats @a:x.org.',
    ],
    [
      'a user twice across groups',
      {
        recipients_by_server: [
          { server: 'x.org', localparts: ['a'] },
          { server: 'x.org', localparts: ['b', 'a'] },
        ],
      },
      'BadJson',
      'recipients_by_server.1.localparts.1 repeats @a:x.org.',
    ],
    [
      'more recipients than the limit, over the groups',
      {
        recipients_by_server: [
          { server: 'x.org', localparts: ['a', 'b', 'c'] },
          { server: 'y.org', localparts: ['a', 'b', 'c'] },
        ],
      },
      'TooLarge',
      undefined,
    ],
    [
      'an event over its limit, before the recipients are looked at',
      {
        event: { ...EVENT, content: { body: 'x'.repeat(100) } },
        recipients_by_server: [{ server: 'x.org', localparts: ['', ''] }],
      },
      'TooLarge',
      undefined,
    ],
  ])('refuses %s', (_case, overrides, kind, message) => {
    const result = toEvaluateCommand(grouped([{ server: 'x.org', localparts: ['a'] }], overrides), LIMITS);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.kind).toBe(kind);
    if (message !== undefined) expect(result.error.message).toBe(message);
  });
});
