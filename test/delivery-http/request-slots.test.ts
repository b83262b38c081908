import { describe, expect, it } from 'vitest';
import { KeyedSlots, LineFullError, RequestSlots, WithdrawnError } from '../../src/delivery-http/request-slots.js';

/** Whether the promise has settled once pending callbacks ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('RequestSlots', () => {
  it('hands out its slots at once, then makes callers wait', async () => {
    const slots = new RequestSlots(2);
    await slots.acquire();
    await slots.acquire();
    expect(await settled(slots.acquire())).toBe(false);
  });

  it('passes a released slot to the first in line, in arrival order', async () => {
    const slots = new RequestSlots(1);
    await slots.acquire();
    const order: string[] = [];
    const first = slots.acquire().then(() => order.push('first'));
    const second = slots.acquire().then(() => order.push('second'));
    slots.release();
    await first;
    expect(order).toEqual(['first']);
    // A newcomer does not overtake the one still waiting.
    const third = slots.acquire().then(() => order.push('third'));
    slots.release();
    await second;
    slots.release();
    await third;
    expect(order).toEqual(['first', 'second', 'third']);
  });

  it('is idle only with no slot out and nobody waiting', async () => {
    const slots = new RequestSlots(1);
    expect(slots.idle).toBe(true);
    await slots.acquire();
    expect(slots.idle).toBe(false);
    const waiting = slots.acquire();
    slots.release();
    await waiting;
    expect(slots.idle).toBe(false);
    slots.release();
    expect(slots.idle).toBe(true);
  });

  it('refuses everyone waiting, leaving the slots handed out as they are', async () => {
    const slots = new RequestSlots(1);
    await slots.acquire();
    const waiting = [slots.acquire(), slots.acquire()];
    const closed = new Error('closed');
    slots.refuseWaiting(closed);
    for (const wait of waiting) await expect(wait).rejects.toBe(closed);
    expect(slots.idle).toBe(false);
    slots.release();
    expect(slots.idle).toBe(true);
  });

  it('lets a caller whose signal aborts leave the line: nothing taken, the next in line gets the slot', async () => {
    const slots = new RequestSlots(1);
    await slots.acquire();
    const withdraw = new AbortController();
    const leaving = slots.acquire(withdraw.signal);
    const next = slots.acquire();
    withdraw.abort();
    await expect(leaving).rejects.toBeInstanceOf(WithdrawnError);
    slots.release();
    await next;
    slots.release();
    expect(slots.idle).toBe(true);
    await expect(slots.acquire(withdraw.signal)).rejects.toBeInstanceOf(WithdrawnError);
    expect(slots.idle).toBe(true);
  });

  it('shares one abort listener among every caller waiting on a signal; those granted first are not withdrawn', async () => {
    const slots = new RequestSlots(1);
    await slots.acquire();
    const withdraw = new AbortController();
    const added = { count: 0 };
    const add = withdraw.signal.addEventListener.bind(withdraw.signal);
    withdraw.signal.addEventListener = (...args: Parameters<AbortSignal['addEventListener']>) => {
      added.count += 1;
      add(...args);
    };
    const waiting = Array.from({ length: 100 }, async () => slots.acquire(withdraw.signal));
    const granted = waiting[0];
    slots.release();
    await granted;
    withdraw.abort();
    for (const wait of waiting.slice(1)) await expect(wait).rejects.toBeInstanceOf(WithdrawnError);
    expect(added.count).toBe(1);
    slots.release();
    expect(slots.idle).toBe(true);
  });

  it.each([0, -1, 1.5, Number.NaN, Infinity])('refuses %s slots', (size) => {
    expect(() => new RequestSlots(size)).toThrow(RangeError);
  });
});

describe('RequestSlots with a bounded line', () => {
  it.each<[string, number, number, number, number]>([
    // what, slots, line, callers, refused at once
    ['no line: a caller finding no slot is refused', 1, 0, 3, 2],
    ['a line as long as the slots', 2, 2, 6, 2],
    ['callers within slots and line all get in', 2, 2, 4, 0],
  ])('%s', async (_, size, maxWaiting, callers, refusedCount) => {
    const slots = new RequestSlots(size, maxWaiting);
    const outcomes = Array.from({ length: callers }, async () =>
      slots.acquire().then(
        () => 'slot',
        (error: unknown) => (error instanceof LineFullError ? 'line full' : 'other'),
      ),
    );
    // Let the ones that got a slot give it back, so that the line moves on.
    for (let index = 0; index < callers; index += 1) {
      await new Promise((resolve) => setImmediate(resolve));
      if (!slots.idle) slots.release();
    }
    const results = await Promise.all(outcomes);
    expect(results.filter((result) => result === 'line full')).toHaveLength(refusedCount);
    expect(results.filter((result) => result === 'other')).toHaveLength(0);
    // Refused callers took nothing: they are the last ones, after the slots and the line.
    expect(results.slice(callers - refusedCount).every((result) => result === 'line full')).toBe(true);
  });

  it.each([-1, 1.5, Number.NaN])('refuses a line of %s', (maxWaiting) => {
    expect(() => new RequestSlots(1, maxWaiting)).toThrow(RangeError);
  });
});

describe('KeyedSlots', () => {
  it('caps each key on its own, and forgets a key once idle', async () => {
    const slots = new KeyedSlots(1, 1);
    await slots.acquire('a');
    await slots.acquire('b');
    const waiting = slots.acquire('a');
    await expect(slots.acquire('a')).rejects.toBeInstanceOf(LineFullError);
    expect(slots.keys).toBe(2);
    slots.release('b');
    expect(slots.keys).toBe(1);
    slots.release('a');
    await waiting;
    slots.release('a');
    expect(slots.keys).toBe(0);
  });

  it('forgets a key whose only caller was refused', async () => {
    const slots = new KeyedSlots(1);
    await slots.acquire('a');
    const waiting = slots.acquire('a');
    const closed = new Error('closed');
    slots.refuseWaiting(closed);
    await expect(waiting).rejects.toBe(closed);
    slots.release('a');
    expect(slots.keys).toBe(0);
  });

  it('says a release without a slot out is a bug', () => {
    expect(() => {
      new KeyedSlots(1).release('a');
    }).toThrow(/no slot/);
  });

  it.each([0, 1.5])('refuses %s slots at construction', (size) => {
    expect(() => new KeyedSlots(size)).toThrow(RangeError);
  });
});
