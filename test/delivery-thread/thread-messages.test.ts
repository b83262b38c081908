import { describe, expect, it } from 'vitest';
import { PartitionCountMismatchError } from '../../src/delivery-service/partition-count-guard.js';
import { deepFrozen, describeError, restartDelayMs, revivedError } from '../../src/delivery-thread/thread-messages.js';

describe('errors across the port', () => {
  it('revive a partition count mismatch as its own class, with the workers that disagree', () => {
    const disagreeing = [{ worker: 'host/1/abc', partitions: 4 }];
    const revived = revivedError(structuredClone(describeError(new PartitionCountMismatchError(8, disagreeing), 8)));
    expect(revived).toBeInstanceOf(PartitionCountMismatchError);
    expect(revived).toMatchObject({ disagreeing });
    expect(revived.message).toContain('delivery.partitions is 8 here');
  });

  it.each([
    ['an Error', new TypeError('bad'), { name: 'TypeError', message: 'bad' }],
    ['anything else', 'text', { name: 'Error', message: 'text' }],
  ])('revive %s with its name and message', (_, error, expected) => {
    const revived = revivedError(structuredClone(describeError(error)));
    expect({ name: revived.name, message: revived.message }).toEqual(expected);
    expect(revived).not.toBeInstanceOf(PartitionCountMismatchError);
  });
});

describe('restartDelayMs', () => {
  it.each([
    [0, 0],
    [1, 1000],
    [2, 2000],
    [5, 16_000],
    [6, 30_000],
    [20, 30_000],
  ])('after %i failed starts in a row waits %i ms', (failedStarts, expected) => {
    expect(restartDelayMs(failedStarts, 1000)).toBe(expected);
  });
});

describe('deepFrozen', () => {
  it('freezes every level of the configuration the thread gets', () => {
    const config = deepFrozen({ delivery: { partitions: 4, allow: ['127.0.0.1/32'] } });
    expect(() => {
      (config.delivery as { partitions: number }).partitions = 8;
    }).toThrow(TypeError);
    expect(() => {
      config.delivery.allow.push('10.0.0.0/8');
    }).toThrow(TypeError);
  });
});
