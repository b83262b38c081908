import { describe, expect, it } from 'vitest';
import { RequestSlots } from '../../src/delivery-http/request-slots.js';

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

  it.each([0, -1, 1.5, Number.NaN, Infinity])('refuses %s slots', (size) => {
    expect(() => new RequestSlots(size)).toThrow(RangeError);
  });
});
