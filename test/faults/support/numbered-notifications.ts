import type { NotifyNotification, NotifyRecipient } from '../../../src/client/push-rules-client.js';

/**
 * The delivery fault tests' vocabulary: notification n is event `$event<n>`,
 * so that the order a device got its notifications in reads off their IDs.
 */

/** `count` user IDs, `@<prefix><i>:example.org`. */
export const users = (count: number, prefix: string): string[] =>
  Array.from({ length: count }, (_, i) => `@${prefix}${String(i)}:example.org`);

/** Notification n: a message event `$event<n>`. */
export const aMessage = (n: number): NotifyNotification => ({
  event_id: `$event${String(n)}`,
  room_id: '!room:example.org',
  type: 'm.room.message',
  sender: '@dave:example.org',
  content: { msgtype: 'm.text', body: `message ${String(n)}` },
});

/** Each user notified, with an unread count. */
export const recipients = (list: readonly string[]): NotifyRecipient[] =>
  list.map((user_id) => ({ user_id, actions: ['notify'], counts: { unread: 1 } }));
