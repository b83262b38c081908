import { describe, expect, it } from 'vitest';
import { addArrivals, type ArrivingRequest } from '../../src/delivery/backlog-arrivals.js';
import { emptyBacklog, type DeviceBacklog } from '../../src/delivery/device-backlog.js';

const POLICY = { maxPending: 3 };
const SAVED = { failures: 4, firstFailedAt: 1_000, retryAt: 9_000 };

/** A request named by its publish order; `retry`: the state its last holder saved. */
function a(seq: number, retry?: ArrivingRequest['retry']): ArrivingRequest {
  return { id: `r${seq}`, seq, retry };
}

function holding(seqs: readonly number[], overrides: Partial<DeviceBacklog<ArrivingRequest>> = {}) {
  return { ...emptyBacklog<ArrivingRequest>(), queue: seqs.map((seq) => a(seq)), ...overrides };
}

const ids = (items: readonly ArrivingRequest[]) => items.map((item) => item.id);

describe('requests arriving in a device backlog', () => {
  it.each([
    { case: 'new ones go to the back', held: [1, 2], arriving: [3], queue: ['r1', 'r2', 'r3'], dropped: [] },
    {
      case: 'past the cap the oldest waiting is dropped',
      held: [1, 2, 3],
      arriving: [4],
      queue: ['r2', 'r3', 'r4'],
      dropped: ['r1'],
    },
    {
      case: 'older ones taken over go before newer ones held',
      held: [5],
      arriving: [2, 3],
      queue: ['r2', 'r3', 'r5'],
      dropped: [],
    },
    { case: 'arrivals out of order are sorted', held: [], arriving: [3, 1, 2], queue: ['r1', 'r2', 'r3'], dropped: [] },
    {
      case: 'sorted in past the cap: the oldest leave',
      held: [5, 6],
      arriving: [1, 2],
      queue: ['r2', 'r5', 'r6'],
      dropped: ['r1'],
    },
  ])('$case', ({ held, arriving, queue, dropped }) => {
    const [first, ...rest] = arriving.map((seq) => a(seq));
    if (first === undefined) throw new Error('a case needs an arrival');
    const change = addArrivals(holding(held), [first, ...rest], POLICY);
    expect(ids(change.backlog.queue)).toEqual(queue);
    expect(ids(change.dropped)).toEqual(dropped);
  });

  it('keeps the front in flight first: older arrivals wait behind it', () => {
    const change = addArrivals(holding([5, 6], { inFlight: true }), [a(2)], POLICY);
    expect(ids(change.backlog.queue)).toEqual(['r5', 'r2', 'r6']);
    expect(change.backlog.inFlight).toBe(true);
  });

  it('carries on the backoff its last holder saved, when it is all the device holds', () => {
    const change = addArrivals(emptyBacklog<ArrivingRequest>(), [a(1, SAVED), a(2)], POLICY);
    expect(change.backlog).toMatchObject({
      failures: SAVED.failures,
      frontFailedAt: SAVED.firstFailedAt,
      retryAt: SAVED.retryAt,
    });
  });

  it('takes the retry state of an older request sorted in at the front, not the one it displaced', () => {
    const backlog = holding([5], { failures: 1, frontFailedAt: 50, retryAt: 60 });
    const change = addArrivals(backlog, [a(2, SAVED)], POLICY);
    expect(ids(change.backlog.queue)).toEqual(['r2', 'r5']);
    expect(change.backlog).toMatchObject({ frontFailedAt: SAVED.firstFailedAt, retryAt: SAVED.retryAt });
  });

  it('leaves the backoff of a device that already holds requests when new ones arrive behind', () => {
    const backlog = holding([1], { failures: 2, frontFailedAt: 50, retryAt: 60 });
    const change = addArrivals(backlog, [a(2, SAVED)], POLICY);
    expect(change.backlog).toMatchObject({ failures: 2, frontFailedAt: 50, retryAt: 60 });
  });
});
