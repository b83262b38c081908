import { describe, expect, it } from 'vitest';
import { checkNotifyBody } from '../../src/local-push-gateway/notify-body.js';

const device = { app_id: 'org.example.app', pushkey: 'key-1' };
const withNotification = (notification: Record<string, unknown>) =>
  JSON.stringify({ notification: { devices: [device], ...notification } });

describe('checkNotifyBody: what the push gateway API accepts', () => {
  it.each([
    [
      'the spec example',
      withNotification({
        event_id: '$3957tyerfgewrf384',
        room_id: '!slw48wfj34rtnrf:example.com',
        type: 'm.room.message',
        sender: '@exampleuser:matrix.org',
        sender_display_name: 'Major Tom',
        room_name: 'Mission Control',
        room_alias: '#exampleroom:matrix.org',
        prio: 'high',
        content: { msgtype: 'm.text', body: "I'm floating in a most peculiar way." },
        counts: { unread: 2, missed_calls: 1 },
        devices: [
          {
            app_id: 'org.matrix.matrixConsole.ios',
            pushkey: 'V2h5',
            pushkey_ts: 12345678,
            data: {},
            tweaks: { sound: 'bing' },
          },
        ],
      }),
    ],
    ['only devices (every other field is optional)', withNotification({})],
    ['a badge update: counts without an event', withNotification({ counts: { unread: 0 } })],
    ['prio low', withNotification({ prio: 'low' })],
    ['user_is_target', withNotification({ user_is_target: true })],
    [
      'fields the spec does not name (its objects are open)',
      JSON.stringify({ notification: { devices: [{ ...device, extra: 1 }], extra: [] }, extra: true }),
    ],
    [
      'an empty pushkey (the spec types it as a string only)',
      withNotification({ devices: [{ app_id: 'a', pushkey: '' }] }),
    ],
    ['several devices', withNotification({ devices: [device, { app_id: 'b', pushkey: 'key-2' }] })],
  ])('accepts %s', (_name, text) => {
    const check = checkNotifyBody(text);
    expect(check.ok).toBe(true);
  });

  it.each([
    ['text that is not JSON', 'not json', 'M_NOT_JSON', 'The body is not JSON'],
    ['an empty body', '', 'M_NOT_JSON', 'The body is not JSON'],
    ['a JSON array', '[]', 'M_BAD_JSON', 'The body is not a JSON object'],
    ['no notification', '{}', 'M_BAD_JSON', 'notification is missing or not an object'],
    [
      'a notification that is a string',
      '{"notification":"x"}',
      'M_BAD_JSON',
      'notification is missing or not an object',
    ],
    ['no devices', '{"notification":{}}', 'M_BAD_JSON', 'notification.devices is missing or not an array'],
    [
      'an empty devices list (Sygnal: 400)',
      withNotification({ devices: [] }),
      'M_BAD_JSON',
      'No devices in notification',
    ],
    [
      'a device without app_id',
      withNotification({ devices: [{ pushkey: 'k' }] }),
      'M_BAD_JSON',
      'notification.devices[0].app_id is missing or not a string',
    ],
    [
      'a device without pushkey',
      withNotification({ devices: [device, { app_id: 'a' }] }),
      'M_BAD_JSON',
      'notification.devices[1].pushkey is missing or not a string',
    ],
    [
      'a device that is not an object',
      withNotification({ devices: ['k'] }),
      'M_BAD_JSON',
      'notification.devices[0] is not an object',
    ],
    [
      'a pushkey_ts that is not an integer',
      withNotification({ devices: [{ ...device, pushkey_ts: 1.5 }] }),
      'M_BAD_JSON',
      'notification.devices[0].pushkey_ts is not an integer',
    ],
    [
      'device data that is not an object',
      withNotification({ devices: [{ ...device, data: [] }] }),
      'M_BAD_JSON',
      'notification.devices[0].data is not an object',
    ],
    [
      'tweaks that are not an object',
      withNotification({ devices: [{ ...device, tweaks: 'loud' }] }),
      'M_BAD_JSON',
      'notification.devices[0].tweaks is not an object',
    ],
    [
      'an event_id that is not a string',
      withNotification({ event_id: 1 }),
      'M_BAD_JSON',
      'notification.event_id is not a string',
    ],
    ['a null room_id', withNotification({ room_id: null }), 'M_BAD_JSON', 'notification.room_id is not a string'],
    [
      'a prio other than high or low',
      withNotification({ prio: 'urgent' }),
      'M_BAD_JSON',
      'notification.prio is neither "high" nor "low"',
    ],
    [
      'user_is_target that is not a boolean',
      withNotification({ user_is_target: 'yes' }),
      'M_BAD_JSON',
      'notification.user_is_target is not a boolean',
    ],
    [
      'content that is not an object',
      withNotification({ content: 'hi' }),
      'M_BAD_JSON',
      'notification.content is not an object',
    ],
    [
      'counts that are not an object',
      withNotification({ counts: 3 }),
      'M_BAD_JSON',
      'notification.counts is not an object',
    ],
    [
      'an unread count that is not an integer',
      withNotification({ counts: { unread: '3' } }),
      'M_BAD_JSON',
      'notification.counts.unread is not an integer',
    ],
    [
      'a missed_calls count that is not an integer',
      withNotification({ counts: { missed_calls: 0.5 } }),
      'M_BAD_JSON',
      'notification.counts.missed_calls is not an integer',
    ],
  ])('refuses %s', (_name, text, errcode, error) => {
    expect(checkNotifyBody(text)).toEqual({ ok: false, errcode, error });
  });
});
