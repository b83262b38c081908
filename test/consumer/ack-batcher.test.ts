import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../src/consumer/ack-batcher.js';

/** A batcher on a channel that records acks, flushed only when the test says so. */
function batcherWith(...delivered: number[]) {
  const acks: [number, boolean][] = [];
  const flushes: (() => void)[] = [];
  const batcher = new AckBatcher(
    {
      ack: (message, allUpTo = false) => {
        acks.push([message.fields.deliveryTag, allUpTo]);
      },
    },
    (flush) => flushes.push(flush),
  );
  for (const tag of delivered) batcher.delivered(tag);
  const runScheduled = () => {
    for (const flush of flushes.splice(0)) flush();
  };
  return { batcher, acks, flushes, runScheduled };
}

describe('AckBatcher', () => {
  it('acks nothing until the scheduled flush, and schedules one flush per batch', () => {
    const { batcher, acks, flushes } = batcherWith(1, 2, 3);
    batcher.answered(1);
    batcher.answered(2);
    expect(acks).toEqual([]);
    expect(flushes).toHaveLength(1);
  });

  it.each<[string, number[], number[], [number, boolean][], number]>([
    ['a lone delivery (c = 1)', [1], [1], [[1, true]], 0],
    ['the last open one of a batch: the whole run at once', [1, 2, 3], [2, 1, 3], [[3, true]], 1],
    ['one of several open: waits for the turn', [1, 2], [1], [], 1],
  ])(
    'acks at once, in the turn of the answer, when every open delivery is answered: %s',
    (_, delivered, answered, acksNow, scheduled) => {
      const { batcher, acks, flushes } = batcherWith(...delivered);
      for (const tag of answered) batcher.answered(tag);
      expect(acks).toEqual(acksNow);
      expect(flushes).toHaveLength(scheduled);
    },
  );

  it('acks an answered run from the oldest delivery with one multiple ack', () => {
    const { batcher, acks, runScheduled } = batcherWith(1, 2, 3, 4);
    batcher.answered(2);
    batcher.answered(1);
    batcher.answered(3);
    runScheduled();
    expect(acks).toEqual([[3, true]]);
  });

  it('acks deliveries answered after a gap one by one, never covering the unanswered one', () => {
    const { batcher, acks, runScheduled } = batcherWith(1, 2, 3, 4);
    batcher.answered(2);
    batcher.answered(4);
    runScheduled();
    expect(acks).toEqual([
      [2, false],
      [4, false],
    ]);
    // The slow one is acked alone when it is answered, and nothing is acked twice.
    batcher.answered(1);
    runScheduled();
    expect(acks.slice(2)).toEqual([[1, true]]);
  });

  it('starts a new run after earlier deliveries are settled', () => {
    const { batcher, acks, runScheduled } = batcherWith(1, 2);
    batcher.answered(1);
    batcher.answered(2);
    runScheduled();
    batcher.delivered(3);
    batcher.delivered(4);
    batcher.answered(3);
    batcher.answered(4);
    runScheduled();
    expect(acks).toEqual([
      [2, true],
      [4, true],
    ]);
  });

  it('lets a delivery settled elsewhere (nack) out of the run', () => {
    const { batcher, acks, runScheduled } = batcherWith(1, 2, 3);
    batcher.settledElsewhere(1);
    batcher.answered(2);
    batcher.answered(3);
    runScheduled();
    expect(acks).toEqual([[3, true]]);
  });

  it('flush() sends pending acks at once, and the scheduled flush then has nothing to do', () => {
    const { batcher, acks, runScheduled } = batcherWith(1, 2);
    batcher.answered(1);
    batcher.flush();
    expect(acks).toEqual([[1, true]]);
    runScheduled();
    expect(acks).toEqual([[1, true]]);
  });

  it('never acks an unanswered delivery and acks every answered one, whatever the order of answers', () => {
    // The broker's view: deliveries not yet acked; an ack of one that is not
    // outstanding is a channel error, a multiple ack covers all outstanding up to its tag.
    const tags = Array.from({ length: 40 }, (_, i) => i + 1);
    const outstanding = new Set(tags);
    const answered = new Set<number>();
    const frames = { count: 0 };
    const flushes: (() => void)[] = [];
    const batcher = new AckBatcher(
      {
        ack: (message, allUpTo = false) => {
          frames.count += 1;
          const tag = message.fields.deliveryTag;
          const covered = allUpTo ? [...outstanding].filter((t) => t <= tag) : [tag];
          expect(outstanding.has(tag)).toBe(true);
          for (const t of covered) {
            expect(answered.has(t)).toBe(true);
            outstanding.delete(t);
          }
        },
      },
      (flush) => flushes.push(flush),
    );
    for (const tag of tags) batcher.delivered(tag);
    const order = [...tags].sort((a, b) => ((a * 7919) % 41) - ((b * 7919) % 41));
    order.forEach((tag, i) => {
      answered.add(tag);
      batcher.answered(tag);
      if (i % 3 === 2) for (const flush of flushes.splice(0)) flush();
    });
    for (const flush of flushes.splice(0)) flush();
    expect(outstanding.size).toBe(0);
    expect(frames.count).toBeLessThan(tags.length);
  });
});
