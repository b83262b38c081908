import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BACKLOG_POLICY,
  emptyBacklog,
  enqueue,
  markSent,
  nextSend,
  settleDone,
  settleRetry,
  settleWithdrawn,
  type BacklogChange,
  type BacklogPolicy,
  type DeviceBacklog,
} from '../../src/delivery/device-backlog.js';
import type { RetryPolicy } from '../../src/delivery/retry-schedule.js';

/** Small numbers: at random 0 the device waits 0.5, 1, 2, 4, 4 … s; a notification is given up after 60 s; 3 wait at most. */
const RETRY: RetryPolicy = { baseMs: 1000, maxMs: 8000, giveUpAfterMs: 60_000 };
const POLICIES = { retry: RETRY, backlog: { maxPending: 3 } };
const atZero = () => 0;

function aBacklog(overrides: Partial<DeviceBacklog<string>> = {}): DeviceBacklog<string> {
  return { ...emptyBacklog<string>(), ...overrides };
}

/**
 * One device's life as a script, and what it did as a log:
 * - `publish x`: a notification is published (logs what the cap dropped);
 * - `try t`: at time t, the device sends its front if due (`sent x`), or
 *   says why not (`wait until t`, `in-flight`, `empty`), after giving up a
 *   front whose window ended unsent (`gave up x`);
 * - `done`: the request in flight is over for good (delivered, or a 4xx);
 * - `fail t [retryAfterMs]`: it failed at t in a way worth retrying
 *   (`retry at t`, or `gave up x`, and what the cap dropped);
 * - `withdraw`: the request in flight was withdrawn before it went out
 *   (`withdrawn x`, and what the cap dropped).
 */
type Step =
  | readonly ['publish', string]
  | readonly ['try', number]
  | readonly ['done']
  | readonly ['fail', number]
  | readonly ['fail', number, number]
  | readonly ['withdraw'];

function run(steps: readonly Step[], policies = POLICIES): string[] {
  let backlog = emptyBacklog<string>();
  const log: string[] = [];
  const apply = (change: Omit<BacklogChange<string>, 'dropped'> & { readonly dropped?: readonly string[] }) => {
    for (const item of change.dropped ?? []) log.push(`dropped ${item}`);
    for (const item of change.gaveUp) log.push(`gave up ${item}`);
    backlog = change.backlog;
  };
  for (const step of steps) {
    switch (step[0]) {
      case 'publish':
        apply(enqueue(backlog, step[1], policies.backlog));
        break;
      case 'try': {
        const { next, ...change } = nextSend(backlog, step[1], policies.retry);
        apply(change);
        if (next.kind === 'send') {
          backlog = markSent(backlog);
          log.push(`sent ${next.item}`);
        } else log.push(next.kind === 'wait' ? `wait until ${next.until}` : next.kind);
        break;
      }
      case 'done':
        log.push(`done ${backlog.queue[0] ?? '?'}`);
        backlog = settleDone(backlog);
        break;
      case 'withdraw':
        log.push(`withdrawn ${backlog.queue[0] ?? '?'}`);
        apply({ ...settleWithdrawn(backlog, policies.backlog), gaveUp: [] });
        break;
      case 'fail': {
        const [, now, retryAfterMs] = step;
        const change = settleRetry(backlog, { now, retryAfterMs }, policies, atZero);
        if (change.gaveUp.length === 0) log.push(`retry at ${change.backlog.retryAt ?? '?'}`);
        apply(change);
        break;
      }
    }
  }
  return log;
}

describe("a device's notifications", () => {
  it.each<[string, Step[], string[]]>([
    [
      'go out one at a time, in publish order',
      [['publish', 'a'], ['publish', 'b'], ['try', 0], ['try', 0], ['done'], ['try', 0], ['done'], ['try', 0]],
      ['sent a', 'in-flight', 'done a', 'sent b', 'done b', 'empty'],
    ],
    [
      'wait behind a failing front, retried on the backoff, until it goes',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 499],
        ['try', 500],
        ['fail', 500],
        ['try', 1499],
        ['try', 1500],
        ['done'],
        ['try', 1500],
      ],
      [
        'sent a',
        'retry at 500',
        'wait until 500',
        'sent a',
        'retry at 1500',
        'wait until 1500',
        'sent a',
        'done a',
        'sent b',
      ],
    ],
    [
      "wait for the gateway's Retry-After when it is later than the backoff",
      [
        ['publish', 'a'],
        ['try', 0],
        ['fail', 0, 30_000],
        ['try', 29_999],
        ['try', 30_000],
      ],
      ['sent a', 'retry at 30000', 'wait until 30000', 'sent a'],
    ],
    [
      'move on at once after a request that failed for good, the backoff started afresh',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 500],
        ['done'],
        ['try', 500],
        ['fail', 500],
      ],
      ['sent a', 'retry at 500', 'sent a', 'done a', 'sent b', 'retry at 1000'],
    ],
    [
      'keep the newest 3 when more arrive: the oldest are dropped, counted',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['publish', 'e'],
        ['try', 0],
      ],
      ['dropped a', 'dropped b', 'sent c'],
    ],
    [
      'after an outage, get the newest 3, in order: the failing front is the first dropped',
      [
        ['publish', 'a'],
        ['try', 0],
        ['fail', 0],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['publish', 'e'],
        ['publish', 'f'],
        ['try', 500],
        ['done'],
        ['try', 500],
        ['done'],
        ['try', 500],
        ['done'],
        ['try', 500],
      ],
      [
        'sent a',
        'retry at 500',
        'dropped a',
        'dropped b',
        'dropped c',
        'sent d',
        'done d',
        'sent e',
        'done e',
        'sent f',
        'done f',
        'empty',
      ],
    ],
    [
      'keep the one in flight (it cannot be unsent) and the newest 3 behind it',
      [
        ['publish', 'a'],
        ['try', 0],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['publish', 'e'],
        ['done'],
        ['try', 0],
      ],
      ['sent a', 'dropped b', 'done a', 'sent c'],
    ],
    [
      'drop the front that fails while 3 newer wait: it is the oldest',
      [
        ['publish', 'a'],
        ['try', 0],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['fail', 0],
        ['try', 500],
      ],
      ['sent a', 'retry at 500', 'dropped a', 'sent b'],
    ],
    [
      'send again a front withdrawn before it went out, with no failure counted',
      [['publish', 'a'], ['publish', 'b'], ['try', 0], ['withdraw'], ['try', 0]],
      ['sent a', 'withdrawn a', 'sent a'],
    ],
    [
      'drop the front withdrawn unsent while 3 newer wait: it is the oldest, and no longer in flight',
      [
        ['publish', 'a'],
        ['try', 0],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['publish', 'e'],
        ['withdraw'],
        ['try', 0],
      ],
      ['sent a', 'dropped b', 'withdrawn a', 'dropped a', 'sent c'],
    ],
    [
      'keep the backoff when a failing front is dropped: the gateway is failing no less',
      [
        ['publish', 'a'],
        ['try', 0],
        ['fail', 0],
        ['publish', 'b'],
        ['publish', 'c'],
        ['publish', 'd'],
        ['try', 500],
        ['fail', 500],
      ],
      ['sent a', 'retry at 500', 'dropped a', 'sent b', 'retry at 1500'],
    ],
    [
      'give up a front failing at the end of its window, and move on to the next at once',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 60_000],
        ['fail', 60_000],
        ['try', 60_000],
      ],
      ['sent a', 'retry at 500', 'sent a', 'gave up a', 'sent b'],
    ],
    [
      'still make the last retry, due at the very end of the window, when its timer fires a little late',
      [
        ['publish', 'a'],
        ['try', 0],
        ['fail', 0],
        ['try', 500],
        ['fail', 59_900],
        ['try', 60_003],
      ],
      ['sent a', 'retry at 500', 'sent a', 'retry at 60000', 'sent a'],
    ],
    [
      'give up the last retry when it comes more than baseMs after the end of the window',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 500],
        ['fail', 59_900],
        ['try', 61_001],
      ],
      ['sent a', 'retry at 500', 'sent a', 'retry at 60000', 'gave up a', 'sent b'],
    ],
    [
      'give up, before sending it, a front whose window ended while it could not be sent',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 60_001],
      ],
      ['sent a', 'retry at 500', 'gave up a', 'sent b'],
    ],
    [
      'give up at once a front whose Retry-After reaches past its window',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 500],
        ['fail', 500, 60_000],
        ['try', 500],
      ],
      ['sent a', 'retry at 500', 'sent a', 'gave up a', 'sent b'],
    ],
    [
      'measure the window of the next front from its own first failure',
      [
        ['publish', 'a'],
        ['publish', 'b'],
        ['try', 0],
        ['fail', 0],
        ['try', 60_001],
        ['fail', 60_001],
        ['try', 120_000],
        ['fail', 120_000],
      ],
      ['sent a', 'retry at 500', 'gave up a', 'sent b', 'retry at 60501', 'sent b', 'retry at 120001'],
    ],
  ])('%s', (_, steps, log) => {
    expect(run(steps)).toEqual(log);
  });

  it("do not hold back another device's", () => {
    const policy = { maxPending: 20 };
    let failing = markSent(enqueue(emptyBacklog<string>(), 'a1', policy).backlog);
    failing = enqueue(failing, 'a2', policy).backlog;
    failing = settleRetry(failing, { now: 0 }, { retry: RETRY, backlog: policy }, atZero).backlog;
    const healthy = enqueue(emptyBacklog<string>(), 'b1', policy).backlog;
    expect(nextSend(failing, 100, RETRY).next).toEqual({ kind: 'wait', until: 500 });
    expect(nextSend(healthy, 100, RETRY).next).toEqual({ kind: 'send', item: 'b1' });
  });
});

describe('the cap', () => {
  it.each<[string, BacklogPolicy, number, boolean, number]>([
    ['default (20): 20 published, none dropped', DEFAULT_BACKLOG_POLICY, 20, false, 0],
    ['default (20): 21 published, the oldest dropped', DEFAULT_BACKLOG_POLICY, 21, false, 1],
    ['default (20): 100 published, 80 dropped', DEFAULT_BACKLOG_POLICY, 100, false, 80],
    ['default (20): the first in flight, 21 behind it', DEFAULT_BACKLOG_POLICY, 22, true, 1],
    ['1: only the newest waits', { maxPending: 1 }, 5, false, 4],
    ['1: the one in flight and the newest', { maxPending: 1 }, 5, true, 3],
  ])('%s', (_, policy, published, firstInFlight, droppedCount) => {
    const items = Array.from({ length: published }, (__, i) => `n${i + 1}`);
    let backlog = emptyBacklog<string>();
    const dropped: string[] = [];
    for (const [i, item] of items.entries()) {
      const change = enqueue(backlog, item, policy);
      dropped.push(...change.dropped);
      backlog = change.backlog;
      if (i === 0 && firstInFlight) backlog = markSent(backlog);
    }
    const kept = items.slice(published - Math.min(policy.maxPending, published - (firstInFlight ? 1 : 0)));
    expect(dropped).toHaveLength(droppedCount);
    expect(backlog.queue).toEqual(firstInFlight ? ['n1', ...kept] : kept);
    expect(dropped).toEqual(items.filter((item) => !backlog.queue.includes(item)));
  });
});

describe('misuse is a bug, and says so', () => {
  const waiting = aBacklog({ queue: ['a'] });
  const sending = aBacklog({ queue: ['a'], inFlight: true });
  it.each<[string, () => unknown]>([
    ['marking sent with nothing waiting', () => markSent(aBacklog())],
    ['marking sent twice', () => markSent(sending)],
    ['settling what was not sent', () => settleDone(waiting)],
    ['retrying what was not sent', () => settleRetry(waiting, { now: 0 }, POLICIES, atZero)],
    ['withdrawing what was not sent', () => settleWithdrawn(waiting, POLICIES.backlog)],
  ])('%s', (_, misuse) => {
    expect(misuse).toThrow(/not in flight|no front/);
  });
});

describe('immutability', () => {
  it('every operation leaves the backlog it was given as it was', () => {
    const before = aBacklog({ queue: ['a', 'b', 'c'], failures: 2, frontFailedAt: 0, retryAt: 2000 });
    const frozen = Object.freeze({ ...before, queue: Object.freeze([...before.queue]) });
    enqueue(frozen, 'd', POLICIES.backlog);
    nextSend(frozen, 70_000, RETRY);
    const sent = Object.freeze(markSent(frozen));
    settleDone(sent);
    settleRetry(sent, { now: 3000 }, POLICIES, atZero);
    settleWithdrawn(sent, POLICIES.backlog);
    expect(frozen).toEqual(before);
    expect(sent).toEqual({ ...before, inFlight: true });
  });
});
