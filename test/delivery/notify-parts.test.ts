import { describe, expect, it } from 'vitest';
import type { NotifyRequestBody } from '../../src/contract/ops.js';
import { splitNotify } from '../../src/delivery/notify-parts.js';
import { partitionOf } from '../../src/delivery/partitions.js';
import { aNotification, aRecipient } from '../support/notify-builders.js';

function aRequest(userIds: readonly string[], overrides: Partial<NotifyRequestBody> = {}): NotifyRequestBody {
  return {
    op: 'notify',
    notification: aNotification(),
    recipients: userIds.map((user_id) => aRecipient({ user_id })),
    ...overrides,
  };
}

const users = Array.from({ length: 200 }, (_, n) => `@user${n}:example.org`);

describe('a notify split by partition', () => {
  it('puts every pushed recipient in exactly the part of its partition, once, in the order given', () => {
    const parts = splitNotify(aRequest(users), 8);
    expect(parts.map((part) => part.partition)).toEqual([...parts.map((part) => part.partition)].sort((a, b) => a - b));
    const seen = parts.flatMap((part) =>
      part.request.recipients.map((recipient) => {
        expect(partitionOf(recipient.user_id, 8)).toBe(part.partition);
        return recipient.user_id;
      }),
    );
    expect([...seen].sort()).toEqual([...users].sort());
    for (const part of parts) {
      const inOrder = users.filter((user) => partitionOf(user, 8) === part.partition);
      expect(part.request.recipients.map((recipient) => recipient.user_id)).toEqual(inOrder);
      expect(part.request.notification).toEqual(aNotification());
    }
  });

  it.each<[string, NotifyRequestBody, number]>([
    ['nobody', aRequest([]), 0],
    [
      'a recipient not pushed (dont_notify)',
      { ...aRequest([]), recipients: [aRecipient({ actions: ['dont_notify'] })] },
      0,
    ],
    ['one recipient', aRequest(['@alice:example.org']), 1],
    ['200 recipients over 1 partition', aRequest(users), 1],
  ])('%s: %i parts', (name, request, parts) => {
    expect(splitNotify(request, name.includes('over 1') ? 1 : 32)).toHaveLength(parts);
  });

  it('keeps recipients and their counts and actions as given', () => {
    const recipient = aRecipient({ user_id: '@bob:example.org', counts: { unread: 0 }, actions: ['notify'] });
    const [part] = splitNotify({ ...aRequest([]), recipients: [recipient] }, 4);
    expect(part?.request.recipients).toEqual([recipient]);
  });
});
