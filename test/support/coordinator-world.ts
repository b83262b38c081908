import {
  PartitionCoordinator,
  type PartitionCoordinatorOptions,
} from '../../src/delivery-service/partition-coordinator.js';
import { createLogger } from '../../src/logging/logger.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import type { InMemoryPartitionLeaseStore } from '../../src/store/in-memory-partition-lease-store.js';

/** The coordinator tests' lease (ms) and partition count. */
export const LEASE = 3_000;
export const COUNT = 4;

/** A coordinator whose collaborators record what they are asked: object literals, as the worker's real ones are narrow. */
export function aCoordinator(
  me: string,
  leases: InMemoryPartitionLeaseStore,
  clock: { now: number },
  overrides: Partial<PartitionCoordinatorOptions> = {},
) {
  const calls: string[] = [];
  const pending = new Map<number, PendingDelivery[]>();
  const coordinator = new PartitionCoordinator({
    me,
    partitions: COUNT,
    leaseMs: LEASE,
    leases,
    deliveries: {
      assignPartitions: async () => Promise.resolve(0),
      listPartition: async (partition) => {
        calls.push(`load ${partition}`);
        return Promise.resolve(pending.get(partition) ?? []);
      },
    },
    intake: {
      open: (partition, highestSeq) => calls.push(`open ${partition} after ${highestSeq}`),
      drain: async (partition) => {
        calls.push(`drain ${partition}`);
        return Promise.resolve();
      },
    },
    scheduler: {
      hold: (deliveries) => calls.push(`hold ${deliveries.length}`),
      watchFinished: () => ({ has: () => false, end: () => undefined }),
      resume: () => undefined,
      releasePartition: async (partition) => {
        calls.push(`let go ${partition}`);
        return Promise.resolve();
      },
      close: async () => {
        calls.push('close scheduler');
        return Promise.resolve();
      },
    },
    consumer: {
      subscribe: async (partition) => {
        calls.push(`subscribe ${partition}`);
        return Promise.resolve();
      },
      unsubscribe: async (partition) => {
        calls.push(`unsubscribe ${partition}`);
        return Promise.resolve();
      },
    },
    graceMs: 0,
    writeGraceMs: 0,
    logger: createLogger('silent'),
    now: () => clock.now,
    random: () => 0.5,
    ...overrides,
  });
  return { coordinator, calls, pending };
}

/** Lets the background takeovers and handovers of a round finish. */
export const settle = async () => new Promise((resolve) => setTimeout(resolve, 20));
