import { describe, expect, it } from 'vitest';
import { pushkeyTag } from '../../src/delivery/pushkey-tag.js';
import { deviceLine, isRejected, shown } from '../../src/local-push-gateway/device-line.js';
import type { GatewayNotification } from '../../src/local-push-gateway/notify-body.js';

const AT = new Date(2026, 0, 2, 3, 4, 5, 6);
const device = { app_id: 'org.example.app', pushkey: 'a-long-device-token' };
const TAG = pushkeyTag(device.pushkey);
const notification = (fields: Partial<GatewayNotification>): GatewayNotification => ({ devices: [device], ...fields });

describe('deviceLine: one readable line per device', () => {
  it.each([
    [
      'an event with counts and prio',
      notification({ event_id: '$ev', room_id: '!r:hs', counts: { unread: 2, missed_calls: 0 }, prio: 'high' }),
      false,
      `03:04:05.006 notified event=$ev room=!r:hs unread=2 missed_calls=0 prio=high app=org.example.app pushkey=${TAG}`,
    ],
    [
      'a badge update (no event, no room)',
      notification({ counts: { unread: 0 }, prio: 'low' }),
      false,
      `03:04:05.006 notified event=none unread=0 prio=low app=org.example.app pushkey=${TAG}`,
    ],
    [
      'no prio: the spec assumes high',
      notification({ event_id: '$ev', room_id: '!r:hs' }),
      false,
      `03:04:05.006 notified event=$ev room=!r:hs prio=high(default) app=org.example.app pushkey=${TAG}`,
    ],
    [
      'a rejected device',
      notification({ event_id: '$ev', room_id: '!r:hs', prio: 'low' }),
      true,
      `03:04:05.006 rejected event=$ev room=!r:hs prio=low app=org.example.app pushkey=${TAG}`,
    ],
    [
      'a value with a newline and an escape sequence stays on one line',
      notification({ event_id: '$ev\n03:00:00.000 notified event=$forged', room_id: '!r\u001b[31m:hs' }),
      false,
      `03:04:05.006 notified event=$ev\\u{a}03:00:00.000\\u{20}notified\\u{20}event=$forged room=!r\\u{1b}[31m:hs prio=high(default) app=org.example.app pushkey=${TAG}`,
    ],
  ])('%s', (_name, given, rejected, line) => {
    expect(deviceLine(AT, given, device, rejected)).toBe(line);
  });

  it('never shows the pushkey itself', () => {
    expect(deviceLine(AT, notification({ event_id: '$ev' }), device, false)).not.toContain(device.pushkey);
  });
});

describe('shown', () => {
  it.each([
    ['$plain:example.org', '$plain:example.org'],
    ['', '""'],
    ['a b', 'a\\u{20}b'],
    ['back\\slash', 'back\\\\slash'],
    ['bidi\u202Eoverride', 'bidi\\u{202e}override'],
    ['x'.repeat(101), `${'x'.repeat(100)}…`],
    ['é'.repeat(100), 'é'.repeat(100)],
  ])('%j → %j', (value, expected) => {
    expect(shown(value)).toBe(expected);
  });
});

describe('isRejected', () => {
  it.each([
    ['listed', new Set(['listed']), true],
    ['reject-anything', new Set<string>(), true],
    ['not-listed', new Set(['listed']), false],
    ['REJECT-upper', new Set<string>(), false],
    ['x-reject-', new Set<string>(), false],
  ])('%s (listed: %j) → %s', (pushkey, listed, expected) => {
    expect(isRejected(pushkey, listed)).toBe(expected);
  });
});
