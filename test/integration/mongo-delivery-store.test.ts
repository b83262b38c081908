import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LIST_PAGE, MongoDeliveryStore } from '../../src/store/mongo-delivery-store.js';
import type { PendingDelivery } from '../../src/store/delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { aDelivery, aNotify, deliveryStoreContract } from '../store/delivery-store-contract.js';
import { partitionLeaseStoreContract } from '../store/partition-lease-store-contract.js';
import { MongoPartitionLeaseStore } from '../../src/store/mongo-partition-lease-store.js';
import { PartitionCoordinator } from '../../src/delivery-service/partition-coordinator.js';
import { createLogger } from '../../src/logging/logger.js';
import { bodyText } from '../../src/delivery/request-body.js';

const client = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000, monitorCommands: true });
const db = client.db(`delivery_${process.pid}_${Date.now()}`);

beforeAll(async () => {
  await client.connect();
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

let collections = 0;
/** Collections of their own per test: a claim takes whatever expired in them. */
async function aStore(): Promise<MongoDeliveryStore> {
  collections += 1;
  const store = storeOn(collections);
  await store.ensureIndexes();
  return store;
}

/** A store on the collections of `n`, with a partition count or none. */
function storeOn(n: number, partitions?: number): MongoDeliveryStore {
  return new MongoDeliveryStore(db, {
    pendingCollection: `pending_${n}`,
    acceptedCollection: `accepted_${n}`,
    acceptedRetentionSeconds: 3_600,
    operationTimeoutMs: 30_000,
    partitions,
  });
}

deliveryStoreContract(
  'MongoDB',
  aStore,
  async (_store, delivery) => {
    const { id, key, seq, userId, url, body, acceptedAt } = delivery;
    // As the service stored it before partitions: a per-request lease, no partition.
    await db.collection(`pending_${collections}`).insertOne({
      _id: id as unknown as never,
      key,
      seq,
      user_id: userId,
      url,
      body_json: bodyText(body),
      devices: [],
      accepted_at: acceptedAt,
      owner: 'an old worker',
      lease_until: 0,
    });
  },
  async (_store, partitions) => {
    await Promise.resolve();
    return storeOn(collections, partitions);
  },
);

partitionLeaseStoreContract('MongoDB', async () => {
  await Promise.resolve();
  collections += 1;
  return new MongoPartitionLeaseStore(db, { collectionPrefix: `leases_${collections}`, operationTimeoutMs: 30_000 });
});

describe('MongoDeliveryStore', () => {
  it('takes a notify of 30,000 requests in a handful of commands, not one per request', async () => {
    const store = await aStore();
    const deliveries = Array.from({ length: 30_000 }, (_, n) =>
      aDelivery({ id: `big/${n}`, key: `key-${n % 10_000}`, seq: n }),
    );
    const commands: string[] = [];
    const listener = (event: { commandName: string }) => commands.push(event.commandName);
    client.on('commandStarted', listener);
    try {
      await store.accept(aNotify({ id: 'big' }), deliveries);
    } finally {
      client.off('commandStarted', listener);
    }
    const counts = Object.fromEntries(
      [...new Set(commands)].map((name) => [name, commands.filter((c) => c === name).length]),
    );
    // One insertMany, which the driver splits at the server's maxWriteBatchSize
    // (MongoDB: 100,000; the test stand-in: 1,000, so about 30 commands); the
    // record. No query at all.
    expect(counts).toEqual({ insert: expect.any(Number) as number });
    expect(counts['insert']).toBeLessThan(40);
  }, 60_000);

  it('reads a partition in pages, each a command of its own under its own time limit, in each key’s order', async () => {
    const store = await aStore();
    const total = 2 * LIST_PAGE + 7;
    // IDs in the opposite order of seq, over a few keys: the order comes from seq, not from the pages.
    const deliveries = Array.from({ length: total }, (_, n) =>
      aDelivery({ id: `page/${String(total - n).padStart(6, '0')}`, key: `key-${n % 3}`, seq: n }),
    );
    await store.accept(aNotify({ id: 'page' }), deliveries);
    await store.accept(aNotify({ id: 'other' }), [aDelivery({ id: 'other/0', partition: 4 })]);
    const commands: { name: string; limit?: unknown; maxTimeMS?: unknown }[] = [];
    const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
      if (event.commandName === 'find' || event.commandName === 'getMore')
        commands.push({
          name: event.commandName,
          limit: event.command['limit'],
          maxTimeMS: event.command['maxTimeMS'],
        });
    };
    client.on('commandStarted', listener);
    let listed: readonly PendingDelivery[];
    try {
      listed = await store.listPartition(3);
    } finally {
      client.off('commandStarted', listener);
    }
    expect(commands).toEqual(Array.from({ length: 3 }, () => ({ name: 'find', limit: LIST_PAGE, maxTimeMS: 30_000 })));
    expect(listed).toHaveLength(total);
    for (const key of ['key-0', 'key-1', 'key-2']) {
      const seqs = listed.filter((d) => d.key === key).map((d) => d.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    }
  }, 60_000);

  it('creates its indexes, the record’s TTL among them, idempotently, and drops the per-request lease ones', async () => {
    const store = await aStore();
    await db.collection(`pending_${collections}`).createIndex({ lease_until: 1 }, { name: 'pending_lease_until' });
    await store.ensureIndexes();
    await store.ensureIndexes();
    const pending = await db.collection(`pending_${collections}`).listIndexes().toArray();
    // In whatever order the server lists them.
    const keys = pending.map((index: { key?: unknown }) => JSON.stringify(index.key)).sort();
    expect(keys).toEqual(
      [
        JSON.stringify({ _id: 1 }),
        JSON.stringify({ partition: 1, _id: 1 }),
        JSON.stringify({ partition: 1, key: 1, seq: 1 }),
        JSON.stringify({ partitions: 1 }),
      ].sort(),
    );
    const accepted = await db.collection(`accepted_${collections}`).listIndexes().toArray();
    expect(accepted).toEqual(
      expect.arrayContaining([expect.objectContaining({ key: { accepted_at: 1 }, expireAfterSeconds: 3_600 })]),
    );
  });

  it('coordinates partitions with the same commands whether 0 or 20,000 requests are pending (none on the requests)', async () => {
    const store = await aStore();
    const pendingName = `pending_${collections}`;
    const roundCommands = async (pending: number): Promise<string[]> => {
      collections += 1;
      const leases = new MongoPartitionLeaseStore(db, { collectionPrefix: `round_${collections}` });
      if (pending > 0)
        await store.accept(
          aNotify({ id: `p${pending}` }),
          Array.from({ length: pending }, (_, n) => aDelivery({ id: `p${pending}/${n}`, key: `k${n}`, partition: 40 })),
        );
      const coordinator = new PartitionCoordinator({
        me: 'w1',
        partitions: 4,
        leaseMs: 15_000,
        leases,
        deliveries: {
          assignPartitions: async () => Promise.resolve(0),
          listPartition: async () => Promise.resolve([]),
        },
        intake: { open: () => undefined, drain: async () => Promise.resolve() },
        scheduler: {
          hold: () => undefined,
          watchFinished: () => ({ has: () => false, end: () => undefined }),
          resume: () => undefined,
          releasePartition: async () => Promise.resolve(),
          close: async () => Promise.resolve(),
        },
        consumer: { subscribe: async () => Promise.resolve(), unsubscribe: async () => Promise.resolve() },
        graceMs: 0,
        writeGraceMs: 0,
        logger: createLogger('silent'),
      });
      // The first round claims; the second is the steady state: heartbeat, renewal, reads of workers and leases.
      await coordinator.round();
      const commands: string[] = [];
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        const collection = event.command[event.commandName];
        commands.push(`${event.commandName} ${typeof collection === 'string' ? collection.replace(/_\d+/, '_N') : ''}`);
      };
      client.on('commandStarted', listener);
      try {
        await coordinator.round();
      } finally {
        client.off('commandStarted', listener);
      }
      await coordinator.close();
      return commands.sort();
    };
    const idle = await roundCommands(0);
    const busy = await roundCommands(20_000);
    expect(busy).toEqual(idle);
    expect(idle.length).toBeLessThanOrEqual(6);
    expect(idle.some((command) => command.includes(pendingName.replace(/_\d+/, '_N')))).toBe(false);
  }, 120_000);

  it('reports a server it cannot reach as unavailable (retry later), not as a failure', async () => {
    const unreachable = new MongoClient('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 200 });
    try {
      const store = new MongoDeliveryStore(unreachable.db('nowhere'), {
        pendingCollection: 'pending',
        acceptedCollection: 'accepted',
        acceptedRetentionSeconds: 60,
      });
      await expect(store.listPartition(1)).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.accept(aNotify(), [aDelivery()])).rejects.toBeInstanceOf(StoreUnavailableError);
      const leases = new MongoPartitionLeaseStore(unreachable.db('nowhere'), { collectionPrefix: 'pending' });
      await expect(leases.renew('w1', [1], 2)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await unreachable.close();
    }
  });
});
