import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, inject } from 'vitest';
import { MongoPushStore, type AccountDataDocument } from '../../src/store/mongo-push-store.js';
import { pushStoreContract } from '../store/push-store-contract.js';

const client = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
const db = client.db(`contract_${process.pid}_${Date.now()}`);
const options = { accountDataCollection: 'account_data', pushersCollection: 'pushers' };

beforeAll(async () => {
  await client.connect();
  await new MongoPushStore(db, options).ensureIndexes();
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

// Once as is, once with the parsed-rules cache: it must never change what a read answers.
for (const [name, parsedCacheChars] of [['MongoDB', 0], ['MongoDB with the parsed-rules cache', 1 << 20]] as const) {
  pushStoreContract(name, async (fixtureOptions) => {
  await Promise.resolve();
  return {
    store: new MongoPushStore(db, { ...options, parsedCacheChars, ...fixtureOptions }),
    putRaw: async (userId, entry) => {
      const pushRules: Record<string, unknown> = {};
      if (entry.contentJson !== undefined) pushRules['content_json'] = entry.contentJson;
      if (entry.defaultsRevision !== undefined) pushRules['defaults_revision'] = entry.defaultsRevision;
      await db
        .collection<AccountDataDocument>('account_data')
        .updateOne({ _id: userId }, { $set: { push_rules: pushRules }, $inc: { version: 1 } }, { upsert: true });
    },
  };
});
}
