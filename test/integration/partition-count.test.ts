import { afterEach, describe, expect, it } from 'vitest';
import { PARTITIONS_PROCEDURE, PartitionCountMismatchError } from '../../src/delivery-service/partition-count-guard.js';
import { createLogger } from '../../src/logging/logger.js';
import { createWorkerProcess } from '../../src/worker-process.js';
import { eventually } from '../support/eventually.js';
import { startDeliveringWorker, type DeliveringWorker } from './support/delivery-harness.js';

describe('a worker whose delivery.partitions the pool does not share', () => {
  let h: DeliveringWorker;

  afterEach(async () => {
    await h.close();
  });

  it('does not start while a live worker runs with another count, naming the procedure', async () => {
    h = await startDeliveringWorker({ delivery: { partitions: 4 } });
    const workers = h.db.collection(`${h.config.delivery.pendingCollection}_workers`);
    await eventually(async () => {
      expect(await workers.countDocuments({ partitions: 4 })).toBe(1);
    }, 30_000);
    const stop = new AbortController();
    const other = createWorkerProcess(
      { ...h.config, delivery: { ...h.config.delivery, partitions: 8 } },
      createLogger('silent'),
      stop,
    );
    try {
      const starting = other.start();
      await expect(starting).rejects.toBeInstanceOf(PartitionCountMismatchError);
      await expect(starting).rejects.toThrow(PARTITIONS_PROCEDURE);
      // It took no part: the pool's heartbeats are the first worker's alone.
      expect(await workers.countDocuments()).toBe(1);
    } finally {
      stop.abort();
      await other.close();
    }
  }, 120_000);
});
