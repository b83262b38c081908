import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { NotifyRequestSchema } from '../../src/contract/request-schemas.js';

// Compiled as the workers compile their schemas: strict, no coercion, no defaults.
const validate = new Ajv({ strict: true, allErrors: false, coerceTypes: false, useDefaults: false }).compile(
  NotifyRequestSchema,
);

/** The contract's example `notify` message, written out literally. */
const CONTRACT_EXAMPLE = {
  op: 'notify',
  notification: {
    event_id: '$ev',
    room_id: '!room:hs',
    type: 'm.room.message',
    sender: '@bob:hs',
    sender_display_name: 'Bob',
    room_name: 'Team',
    room_alias: '#team:hs',
    content: { msgtype: 'm.text', body: 'hi' },
    prio: 'high',
  },
  recipients: [
    {
      user_id: '@alice:hs',
      actions: ['notify', { set_tweak: 'sound', value: 'default' }],
      counts: { unread: 3, missed_calls: 0 },
      user_is_target: false,
    },
  ],
};

const aliceWith = (fields: Record<string, unknown>) => ({ user_id: '@alice:hs', ...fields });

describe('the notify request schema accepts', () => {
  it.each([
    ['the contract example', CONTRACT_EXAMPLE],
    ['an empty notification and no recipients', { op: 'notify', notification: {}, recipients: [] }],
    [
      'a counts-only update (no event_id, a bare recipient)',
      { op: 'notify', notification: { room_id: '!room:hs' }, recipients: [aliceWith({ counts: { unread: 0 } })] },
    ],
    ['low prio', { ...CONTRACT_EXAMPLE, notification: { prio: 'low' } }],
    ['empty counts and empty actions', { ...CONTRACT_EXAMPLE, recipients: [aliceWith({ actions: [], counts: {} })] }],
    [
      'unknown fields at every level (they are ignored)',
      {
        ...CONTRACT_EXAMPLE,
        extra: 1,
        notification: { ...CONTRACT_EXAMPLE.notification, unsigned: { age: 1 } },
        recipients: [aliceWith({ counts: { unread: 1, badge: 'x' }, display_name: 'A' })],
      },
    ],
    ['actions of any JSON type', { ...CONTRACT_EXAMPLE, recipients: [aliceWith({ actions: [1, null, 'x', {}] })] }],
  ])('%s', (_name, body) => {
    expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the notify request schema refuses', () => {
  const withNotification = (fields: Record<string, unknown>) => ({
    ...CONTRACT_EXAMPLE,
    notification: { ...CONTRACT_EXAMPLE.notification, ...fields },
  });
  const withRecipient = (fields: Record<string, unknown>) => ({
    ...CONTRACT_EXAMPLE,
    recipients: [aliceWith(fields)],
  });

  it.each([
    ['another op', { ...CONTRACT_EXAMPLE, op: 'evaluate' }, '/op'],
    ['no notification', { op: 'notify', recipients: [] }, ''],
    ['a notification that is not an object', { ...CONTRACT_EXAMPLE, notification: [] }, '/notification'],
    ['a numeric event_id', withNotification({ event_id: 1 }), '/notification/event_id'],
    ['a null room_id', withNotification({ room_id: null }), '/notification/room_id'],
    ['a numeric type', withNotification({ type: 7 }), '/notification/type'],
    ['a sender that is an object', withNotification({ sender: {} }), '/notification/sender'],
    [
      'a boolean sender_display_name',
      withNotification({ sender_display_name: true }),
      '/notification/sender_display_name',
    ],
    ['a numeric room_name', withNotification({ room_name: 1 }), '/notification/room_name'],
    ['a list room_alias', withNotification({ room_alias: [] }), '/notification/room_alias'],
    ['content that is a string', withNotification({ content: 'hi' }), '/notification/content'],
    ['content that is a list', withNotification({ content: [] }), '/notification/content'],
    ['an unknown prio', withNotification({ prio: 'urgent' }), '/notification/prio'],
    ['no recipients', { op: 'notify', notification: {} }, ''],
    ['recipients that are an object', { ...CONTRACT_EXAMPLE, recipients: {} }, '/recipients'],
    ['a recipient without user_id', { ...CONTRACT_EXAMPLE, recipients: [{ actions: ['notify'] }] }, '/recipients/0'],
    ['a numeric user_id', withRecipient({ user_id: 1 }), '/recipients/0/user_id'],
    ['actions that are a string', withRecipient({ actions: 'notify' }), '/recipients/0/actions'],
    ['counts that are a number', withRecipient({ counts: 3 }), '/recipients/0/counts'],
    ['a negative unread count', withRecipient({ counts: { unread: -1 } }), '/recipients/0/counts/unread'],
    ['a fractional unread count', withRecipient({ counts: { unread: 1.5 } }), '/recipients/0/counts/unread'],
    [
      'a missed_calls count as text',
      withRecipient({ counts: { missed_calls: '2' } }),
      '/recipients/0/counts/missed_calls',
    ],
    ['user_is_target as text', withRecipient({ user_is_target: 'false' }), '/recipients/0/user_is_target'],
  ])('%s', (_name, body, path) => {
    expect(validate(body)).toBe(false);
    expect(validate.errors?.[0]?.instancePath).toBe(path);
  });
});
