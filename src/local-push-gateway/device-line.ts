import { pushkeyTag } from '../delivery/pushkey-tag.js';
import type { GatewayDevice, GatewayNotification } from './notify-body.js';

/** Longest value shown in full on a line; longer ones are cut with `…`. */
const MAX_SHOWN = 100;

/**
 * Whether the local gateway lists a pushkey in `rejected`: those listed in
 * `LOCAL_PUSH_GATEWAY_REJECT`, and every pushkey starting with `reject-`,
 * so that a developer can see a rejected pusher removed without any set-up.
 */
export function isRejected(pushkey: string, listed: ReadonlySet<string>): boolean {
  return listed.has(pushkey) || pushkey.startsWith('reject-');
}

/**
 * The one line the local gateway prints for a device it was asked to notify:
 *
 *     14:03:07.123 notified event=$ev room=!r:hs unread=2 missed_calls=0 prio=high app=org.example pushkey=1a2b3c4d
 *
 * The pushkey is shown as its tag (the first 8 hex characters of its
 * SHA-256, as the worker's own log lines show it), never in full: it is a
 * device token. A notification without `event_id` is a badge update
 * (`event=none`); counts the request left out are left out; a request
 * without `prio` shows `prio=high(default)`, what the spec says to assume.
 * Every value is the homeserver's input: control, format and space
 * characters are escaped (`\u{…}`, and `\` as `\\`), so that one device is always one line.
 */
export function deviceLine(
  at: Date,
  notification: GatewayNotification,
  device: GatewayDevice,
  rejected: boolean,
): string {
  const counts = notification.counts ?? {};
  const parts = [
    clock(at),
    rejected ? 'rejected' : 'notified',
    `event=${notification.event_id === undefined ? 'none' : shown(notification.event_id)}`,
    ...(notification.room_id === undefined ? [] : [`room=${shown(notification.room_id)}`]),
    ...(counts.unread === undefined ? [] : [`unread=${counts.unread}`]),
    ...(counts.missed_calls === undefined ? [] : [`missed_calls=${counts.missed_calls}`]),
    `prio=${notification.prio ?? 'high(default)'}`,
    `app=${shown(device.app_id)}`,
    `pushkey=${pushkeyTag(device.pushkey)}`,
  ];
  return parts.join(' ');
}

/** `HH:MM:SS.mmm`, local time, as the worker's readable log lines show it. */
function clock(at: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

/** A value fit for one line of a terminal: no control, format or space characters, at most `MAX_SHOWN` code points. */
export function shown(value: string): string {
  // By code point: an escape names one, and a cut never splits a surrogate pair.
  const escaped = Array.from(value, (c) => {
    if (c === '\\') return '\\\\';
    return /[\p{C}\p{Z}]/u.test(c) ? `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}` : c;
  });
  const text = escaped.length > MAX_SHOWN ? `${escaped.slice(0, MAX_SHOWN).join('')}…` : escaped.join('');
  return text === '' ? '""' : text;
}
