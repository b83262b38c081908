import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MongoDeliveryStore } from '../../src/store/mongo-delivery-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';
import { aDelivery, aNotify, deliveryStoreContract } from '../store/delivery-store-contract.js';

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
  const store = new MongoDeliveryStore(db, {
    pendingCollection: `pending_${collections}`,
    acceptedCollection: `accepted_${collections}`,
    acceptedRetentionSeconds: 3_600,
    operationTimeoutMs: 30_000,
  });
  await store.ensureIndexes();
  return store;
}

deliveryStoreContract('MongoDB', aStore);

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
      await store.accept(aNotify({ id: 'big' }), deliveries, { owner: 'w1', until: 2_000_000 }, 1_000_000);
    } finally {
      client.off('commandStarted', listener);
    }
    const counts = Object.fromEntries(
      [...new Set(commands)].map((name) => [name, commands.filter((c) => c === name).length]),
    );
    // One find for the holders; one insertMany, which the driver splits at the
    // server's maxWriteBatchSize (MongoDB: 100,000; the test stand-in: 1,000,
    // so about 30 commands); the record. No query to read them back.
    expect(counts).toEqual({ find: 1, insert: expect.any(Number) as number });
    expect(counts['insert']).toBeLessThan(40);
  }, 60_000);

  it('creates its indexes, the record’s TTL among them, idempotently', async () => {
    const store = await aStore();
    await store.ensureIndexes();
    const pending = await db.collection(`pending_${collections}`).listIndexes().toArray();
    expect(pending.map((index: { key?: unknown }) => index.key)).toEqual(
      expect.arrayContaining([{ owner: 1, key: 1, seq: 1 }, { key: 1, seq: 1 }, { lease_until: 1 }]),
    );
    const accepted = await db.collection(`accepted_${collections}`).listIndexes().toArray();
    expect(accepted).toEqual(
      expect.arrayContaining([expect.objectContaining({ key: { accepted_at: 1 }, expireAfterSeconds: 3_600 })]),
    );
  });

  describe('the recovery lock', () => {
    const T = 1_000_000;
    const lockedUntil = async (until: number) =>
      db
        .collection<{ _id: string; token: string; until: number }>(`pending_${collections}_locks`)
        .insertOne({ _id: 'recovery', token: 'a worker that died', until });

    it('keeps a claim from taking anything while another worker holds it, and frees itself when its time runs out', async () => {
      const store = await aStore();
      await store.accept(aNotify({ id: 'd' }), [aDelivery({ id: 'd/0' })], { owner: 'dead', until: T }, T);
      await lockedUntil(T + 10_000);
      expect(await store.claimExpired({ owner: 'w1', until: T + 60_000 }, T + 1)).toEqual([]);
      expect(await store.claimExpired({ owner: 'w1', until: T + 60_000 }, T + 10_001)).toHaveLength(1);
    });

    it('makes an intake that takes over a dead worker’s key wait for it, then take the whole key', async () => {
      const store = await aStore();
      await store.accept(aNotify({ id: 'd' }), [aDelivery({ id: 'd/0', seq: 1 })], { owner: 'dead', until: T }, T);
      await lockedUntil(T + 200);
      const started = Date.now();
      const held = await store.accept(
        aNotify({ id: 'n' }),
        [aDelivery({ id: 'n/0', seq: 2 })],
        { owner: 'w1', until: T + 60_000 },
        T + 1,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      expect(held.map((d) => d.id)).toEqual(['d/0', 'n/0']);
    });
  });

  it('reports a server it cannot reach as unavailable (retry later), not as a failure', async () => {
    const unreachable = new MongoClient('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 200 });
    try {
      const store = new MongoDeliveryStore(unreachable.db('nowhere'), {
        pendingCollection: 'pending',
        acceptedCollection: 'accepted',
        acceptedRetentionSeconds: 60,
      });
      await expect(store.listHeld('w1')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(
        store.accept(aNotify(), [aDelivery()], { owner: 'w1', until: 2_000_000 }, 1_000_000),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await unreachable.close();
    }
  });
});
