import { describe, expect, it } from 'vitest';
import {
  DEFAULT_AGE_POLICY,
  emptyBacklog,
  nextFreshSend,
  withoutStale,
  type AgedItem,
  type DeviceBacklog,
} from '../../src/delivery/device-backlog.js';
import type { RetryPolicy } from '../../src/delivery/retry-schedule.js';

/** As in device-backlog.test.ts: at random 0 the device waits 0.5, 1, 2, 4, 4 … s; a notification is given up after 60 s. */
const RETRY: RetryPolicy = { baseMs: 1000, maxMs: 8000, giveUpAfterMs: 60_000 };

/** A notification of the age tests: `e3` is an event accepted at 3 (s), `b3` a badge update accepted at 3. */
interface Aged extends AgedItem {
  readonly name: string;
}

function aged(name: string): Aged {
  const acceptedAt = Number(name.slice(1)) * 1000;
  return name.startsWith('b') ? { name, acceptedAt, countsOnly: true } : { name, acceptedAt };
}

const names = (items: readonly Aged[]): string[] => items.map((item) => item.name);

describe('the maximum age (10 s here)', () => {
  const AGE = { maxAgeMs: 10_000 };

  it.each<[string, string[], boolean, number, string[], string[], string[]]>([
    // what, queue (oldest first), front in flight, now (s), kept, expired, dropped
    ['nothing old: all kept', ['e1', 'e2'], false, 5, ['e1', 'e2'], [], []],
    ['exactly maxAgeMs old: still sent', ['e1', 'e2'], false, 11, ['e1', 'e2'], [], []],
    [
      'older than maxAgeMs: expired, the fresh ones kept in order',
      ['e1', 'e2', 'e5', 'e9'],
      false,
      14,
      ['e5', 'e9'],
      ['e1', 'e2'],
      [],
    ],
    ['all old: the device has nothing left', ['e1', 'e2'], false, 60, [], ['e1', 'e2'], []],
    [
      'the front in flight stays, however old: it cannot be unsent',
      ['e1', 'e2', 'e9'],
      true,
      15,
      ['e1', 'e9'],
      ['e2'],
      [],
    ],
    ['badge updates: only the newest is kept', ['b1', 'e2', 'b3', 'b4'], false, 5, ['e2', 'b4'], [], ['b1', 'b3']],
    [
      'the newest badge update is kept however old: it is the current badge',
      ['e1', 'b2', 'e3'],
      false,
      60,
      ['b2'],
      ['e1', 'e3'],
      [],
    ],
    ['older badge updates are dropped, not expired', ['b1', 'b2', 'e30'], false, 35, ['b2', 'e30'], [], ['b1']],
    ['a badge in flight is not the newest waiting one', ['b1', 'b2'], true, 60, ['b1', 'b2'], [], []],
  ])('%s', (_, queue, frontInFlight, nowSeconds, kept, expired, dropped) => {
    const backlog = aBacklogOf(queue.map(aged), frontInFlight);
    const change = withoutStale(backlog, nowSeconds * 1000, AGE);
    expect(names(change.backlog.queue)).toEqual(kept);
    expect(names(change.expired)).toEqual(expired);
    expect(names(change.dropped)).toEqual(dropped);
    expect(change.backlog.inFlight).toBe(frontInFlight);
  });

  function aBacklogOf(queue: Aged[], inFlight: boolean): DeviceBacklog<Aged> {
    return { ...emptyBacklog<Aged>(), queue, inFlight };
  }

  it.each<[string, Partial<DeviceBacklog<Aged>>, Partial<DeviceBacklog<Aged>>]>([
    [
      'an expired failing front takes its give-up window with it; the device keeps its backoff',
      { queue: [aged('e1'), aged('e30')], failures: 3, frontFailedAt: 2000, retryAt: 40_000 },
      { failures: 3, frontFailedAt: undefined, retryAt: 40_000 },
    ],
    [
      'a kept failing front keeps its window',
      { queue: [aged('e30'), aged('b2'), aged('b3')], failures: 2, frontFailedAt: 31_000, retryAt: 40_000 },
      { failures: 2, frontFailedAt: 31_000, retryAt: 40_000 },
    ],
    [
      'a front in flight keeps its window while the ones behind it expire',
      { queue: [aged('e1'), aged('e2')], inFlight: true, failures: 1, frontFailedAt: 1000, retryAt: undefined },
      { inFlight: true, failures: 1, frontFailedAt: 1000 },
    ],
  ])('%s', (_, before, after) => {
    const change = withoutStale({ ...emptyBacklog<Aged>(), ...before }, 35_000, AGE);
    expect(change.backlog).toMatchObject(after);
  });

  it.each<[string, string[], number, string, string[], string[]]>([
    // what, queue, now (s), next, expired, dropped
    ['sends the oldest notification still fresh', ['e1', 'e2', 'e20'], 25, 'send e20', ['e1', 'e2'], []],
    ['says empty when everything expired', ['e1', 'e2'], 25, 'empty', ['e1', 'e2'], []],
    ['sends the newest badge update before anything newer', ['b1', 'b2', 'e24'], 25, 'send b2', [], ['b1']],
  ])('nextFreshSend %s', (_, queue, nowSeconds, next, expired, dropped) => {
    const backlog = { ...emptyBacklog<Aged>(), queue: queue.map(aged) };
    const change = nextFreshSend(backlog, nowSeconds * 1000, { retry: RETRY, age: AGE });
    expect(change.next.kind === 'send' ? `send ${change.next.item.name}` : change.next.kind).toBe(next);
    expect(names(change.expired)).toEqual(expired);
    expect(names(change.dropped)).toEqual(dropped);
    expect(change.gaveUp).toEqual([]);
  });

  it('nextFreshSend gives up, as nextSend does, a fresh front whose give-up window ended', () => {
    const backlog = { ...emptyBacklog<Aged>(), queue: [aged('e100'), aged('e101')], failures: 1, frontFailedAt: 0 };
    const change = nextFreshSend(backlog, 105_000, {
      retry: { ...RETRY, giveUpAfterMs: 1000 },
      age: { maxAgeMs: 60_000 },
    });
    expect(names(change.gaveUp)).toEqual(['e100']);
    expect(change.next).toEqual({ kind: 'send', item: aged('e101') });
  });

  it('leaves the backlog it was given as it was, and returns it unchanged when nothing leaves', () => {
    const before = { ...emptyBacklog<Aged>(), queue: [aged('b1'), aged('e2'), aged('b3')] };
    const frozen = Object.freeze({ ...before, queue: Object.freeze([...before.queue]) });
    withoutStale(frozen, 60_000, AGE);
    expect(frozen).toEqual(before);
    const fresh = { ...emptyBacklog<Aged>(), queue: [aged('e1')] };
    expect(withoutStale(fresh, 2000, AGE).backlog).toBe(fresh);
  });

  it('defaults to an hour', () => {
    expect(DEFAULT_AGE_POLICY).toEqual({ maxAgeMs: 3_600_000 });
  });
});
