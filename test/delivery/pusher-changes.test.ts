import { describe, expect, it } from 'vitest';
import { PusherChanges } from '../../src/delivery/pusher-changes.js';

describe('which pending requests are checked against the pushers again', () => {
  it.each<[string, (changes: PusherChanges) => void, string, number, boolean]>([
    ['nothing changed', () => undefined, '@a:x', 10, false],
    [
      'a change after planning',
      (c) => {
        c.changed('@a:x', 20);
      },
      '@a:x',
      10,
      true,
    ],
    [
      'a change at the same moment',
      (c) => {
        c.changed('@a:x', 10);
      },
      '@a:x',
      10,
      true,
    ],
    [
      'a change before planning',
      (c) => {
        c.changed('@a:x', 5);
      },
      '@a:x',
      10,
      false,
    ],
    [
      'another user changed',
      (c) => {
        c.changed('@b:x', 20);
      },
      '@a:x',
      10,
      false,
    ],
    [
      'events may have been missed since',
      (c) => {
        c.forgetAll(20);
      },
      '@a:x',
      10,
      true,
    ],
    [
      'events were missed before planning only',
      (c) => {
        c.forgetAll(5);
      },
      '@a:x',
      10,
      false,
    ],
    [
      'a change forgotten to stay bounded: everything planned before it is checked',
      (c) => {
        c.changed('@b:x', 15);
        c.changed('@c:x', 16);
        c.changed('@d:x', 17);
      },
      '@a:x',
      10,
      true,
    ],
  ])('%s', (_name, arrange, user, plannedAt, expected) => {
    const changes = new PusherChanges(2);
    arrange(changes);
    expect(changes.changedSince(user, plannedAt)).toBe(expected);
  });
});
