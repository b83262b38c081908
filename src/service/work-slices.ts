import { setImmediate as nextTurn } from 'node:timers/promises';
import { DeadlinePassedError } from './bounded-store.js';

/** How synchronous work (compiling, evaluating) is cut: slices of `sliceMs` timed on `clock`, deadlines read on `now`. */
export interface SliceClock {
  readonly sliceMs: number;
  readonly clock: () => number;
  readonly now: () => number;
}

/**
 * Runs `step` until it says it is done, yielding to the event loop
 * whenever it paused at the slice's end. With a deadline (an evaluation's
 * own work, never a read others joined), no slice starts after it: the
 * caller has given up, and a large message must not hold a thread longer.
 */
export async function inSlices(
  step: (shouldPause: () => boolean) => boolean,
  slices: SliceClock,
  deadline?: number,
): Promise<void> {
  for (;;) {
    const sliceEnd = slices.clock() + slices.sliceMs;
    if (step(() => slices.clock() >= sliceEnd)) return;
    await nextTurn();
    if (deadline !== undefined && slices.now() >= deadline)
      throw new DeadlinePassedError('the deadline passed while evaluating');
  }
}
