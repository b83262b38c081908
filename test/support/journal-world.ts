import { afterEach } from 'vitest';
import { DeliveryJournal, type DeliveryJournalOptions } from '../../src/delivery-service/delivery-journal.js';
import { createLogger } from '../../src/logging/logger.js';
import type { AcceptedNotify, DeliveryStore, PendingDelivery } from '../../src/store/delivery-store.js';
import { InMemoryDeliveryStore } from '../../src/store/in-memory-delivery-store.js';

/** The journal tests' partition. */
export const P = 2;
const T0 = Date.now();

export function aRequest(id: string, overrides: Partial<PendingDelivery> = {}): PendingDelivery {
  return {
    id,
    partition: P,
    key: `key-${id}`,
    seq: 1,
    userId: '@alice:example.org',
    url: 'https://push.example.org/_matrix/push/v1/notify',
    body: '{}',
    devices: [{ appId: 'app', pushkey: id }],
    acceptedAt: T0,
    ...overrides,
  };
}

export const aPart = (id: string, acceptedAt = Date.now()): AcceptedNotify => ({
  id,
  recipients: 1,
  devices: 1,
  acceptedAt,
});

const journals: DeliveryJournal[] = [];

/** Every journal a test made is closed after it. */
export function closeJournalsAfterEach(): void {
  afterEach(() => {
    for (const journal of journals.splice(0)) journal.close();
  });
}

/** A started journal over an in-memory store (or `store`), writing while `writable` says so (always). */
export function aJournal(
  options: {
    readonly persistAfterMs?: number;
    readonly writable?: () => boolean;
    readonly store?: Pick<DeliveryStore, 'acceptAll' | 'remove' | 'saveRetry' | 'markDone'>;
    readonly writes?: DeliveryJournalOptions['writes'];
  } = {},
) {
  const store = new InMemoryDeliveryStore();
  const journal = new DeliveryJournal({
    store: options.store ?? store,
    writable: options.writable ?? (() => true),
    persistAfterMs: options.persistAfterMs ?? 40,
    logger: createLogger('silent'),
    ...(options.writes === undefined ? {} : { writes: options.writes }),
  });
  journal.start();
  journals.push(journal);
  return { journal, store };
}

export const wait = async (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether a promise has settled by now, and how. */
export async function state(promise: Promise<void>): Promise<'pending' | 'resolved' | 'rejected'> {
  return Promise.race([
    promise.then(
      () => 'resolved' as const,
      () => 'rejected' as const,
    ),
    wait(5).then(() => 'pending' as const),
  ]);
}
