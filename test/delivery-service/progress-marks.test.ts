import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ProgressMarks } from '../../src/delivery-service/progress-marks.js';
import { createLogger } from '../../src/logging/logger.js';

const SILENT = createLogger('silent');

/** A `markDone` that records what landed, fails while told to, and waits while held. */
function aMarkStore() {
  const landed: string[] = [];
  const state = { failing: false, held: false, waiting: [] as (() => void)[] };
  return {
    landed,
    state,
    release() {
      state.held = false;
      for (const resume of state.waiting.splice(0)) resume();
    },
    markDone: async (batch: ReadonlyMap<string, readonly string[]>) => {
      if (state.held) await new Promise<void>((resolve) => state.waiting.push(resolve));
      if (state.failing) throw new Error('MongoDB is unavailable');
      for (const [part, ids] of batch) for (const id of ids) landed.push(`${part} ${id}`);
    },
  };
}

const marks: ProgressMarks[] = [];
afterEach(() => {
  for (const mark of marks.splice(0)) mark.stop();
});

function someMarks(store: ReturnType<typeof aMarkStore>): ProgressMarks {
  const made = new ProgressMarks(store, SILENT);
  marks.push(made);
  return made;
}

describe('progress marks: what a read of a part’s progress begun now may not list', () => {
  it('is what is noted and not flushed yet, of that part only', () => {
    const made = someMarks(aMarkStore());
    made.note('m1', 'm1/a');
    made.note('m2', 'm2/a');
    expect([...made.watch('m1').ids]).toEqual(['m1/a']);
  });

  it('is what is being written, until the write landed', async () => {
    const store = aMarkStore();
    store.state.held = true;
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    await sleep(80);
    expect([...made.watch('m1').ids]).toEqual(['m1/a']);
    store.release();
    await sleep(10);
    expect(store.landed).toEqual(['m1 m1/a']);
    expect([...made.watch('m1').ids]).toEqual([]);
  });

  it('is a failed write, queued again for the next flush', async () => {
    const store = aMarkStore();
    store.state.failing = true;
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    await sleep(80);
    expect([...made.watch('m1').ids]).toEqual(['m1/a']);
    store.state.failing = false;
    await sleep(80);
    expect(store.landed).toEqual(['m1 m1/a']);
  });

  it('grows with what is noted while the watch is under way, and no more once it ended', async () => {
    const made = someMarks(aMarkStore());
    const watch = made.watch('m1');
    made.note('m1', 'm1/a');
    await sleep(80);
    made.note('m1', 'm1/b');
    made.note('m2', 'm2/a');
    watch.end();
    made.note('m1', 'm1/c');
    expect([...watch.ids]).toEqual(['m1/a', 'm1/b']);
  });
});
