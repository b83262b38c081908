import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProgressMarks } from '../../src/delivery-service/progress-marks.js';
import { createLogger } from '../../src/logging/logger.js';

const SILENT = createLogger('silent');

/** A `markDone` that records what landed, fails while told to, and waits while held. */
function aMarkStore() {
  const landed: string[] = [];
  const state = { failing: false, held: false, waiting: [] as (() => void)[] };
  const writes = { started: 0, inFlight: 0, mostInFlight: 0 };
  return {
    landed,
    state,
    writes,
    release() {
      state.held = false;
      for (const resume of state.waiting.splice(0)) resume();
    },
    markDone: async (batch: ReadonlyMap<string, readonly string[]>) => {
      writes.started += 1;
      writes.inFlight += 1;
      writes.mostInFlight = Math.max(writes.mostInFlight, writes.inFlight);
      try {
        if (state.held) await new Promise<void>((resolve) => state.waiting.push(resolve));
        if (state.failing) throw new Error('MongoDB is unavailable');
        for (const [part, ids] of batch) for (const id of ids) landed.push(`${part} ${id}`);
      } finally {
        writes.inFlight -= 1;
      }
    },
  };
}

const marks: ProgressMarks[] = [];
afterEach(() => {
  for (const mark of marks.splice(0)) mark.stop();
  vi.useRealTimers();
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
    vi.useFakeTimers();
    const store = aMarkStore();
    store.state.failing = true;
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    await vi.advanceTimersByTimeAsync(80);
    expect([...made.watch('m1').ids]).toEqual(['m1/a']);
    store.state.failing = false;
    await vi.advanceTimersByTimeAsync(1_000);
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

describe('progress marks: how they are written', () => {
  it('one write at a time: what is noted while a write is out goes with the next, once it landed', async () => {
    vi.useFakeTimers();
    const store = aMarkStore();
    store.state.held = true;
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    await vi.advanceTimersByTimeAsync(60);
    // A store slower than the flush interval: notes keep coming while the first write is out.
    for (const [index, id] of ['m1/b', 'm1/c', 'm2/a'].entries()) {
      made.note(index === 2 ? 'm2' : 'm1', id);
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(store.writes).toEqual({ started: 1, inFlight: 1, mostInFlight: 1 });
    store.state.held = false;
    store.release();
    await vi.advanceTimersByTimeAsync(49);
    expect(store.writes.started).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(store.writes).toEqual({ started: 2, inFlight: 0, mostInFlight: 1 });
    expect(store.landed).toEqual(['m1 m1/a', 'm1 m1/b', 'm1 m1/c', 'm2 m2/a']);
  });

  it('after a failed write, tries again a second later, not at the next flush', async () => {
    vi.useFakeTimers();
    const store = aMarkStore();
    store.state.failing = true;
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    await vi.advanceTimersByTimeAsync(50);
    made.note('m1', 'm1/b');
    await vi.advanceTimersByTimeAsync(999);
    expect(store.writes.started).toBe(1);
    store.state.failing = false;
    await vi.advanceTimersByTimeAsync(1);
    expect(store.writes.started).toBe(2);
    expect(store.landed).toEqual(['m1 m1/a', 'm1 m1/b']);
  });

  it('nothing is written once stopped', async () => {
    vi.useFakeTimers();
    const store = aMarkStore();
    const made = someMarks(store);
    made.note('m1', 'm1/a');
    made.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(store.writes.started).toBe(0);
  });
});
