import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MongoPushStore, type AccountDataDocument, type PusherDocument } from '../../src/store/mongo-push-store.js';
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

describe('MongoDB: pushers stored before devices and enabled were kept', () => {
  const legacy = {
    user_id: '@legacy:example.org',
    app_id: 'org.example.app',
    pushkey: 'legacy-key',
    kind: 'http' as const,
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data_json: '{"url":"https://push.example.org/_matrix/push/v1/notify"}',
  };
  const store = () => new MongoPushStore(db, options);

  it('read as enabled, of an unknown device; a logout of any device keeps them, log out everywhere removes them', async () => {
    await db.collection<PusherDocument>('pushers').insertOne({ ...legacy });
    const [read] = await store().listPushers(legacy.user_id);
    const { data_json: _json, ...values } = legacy;
    expect(read).toStrictEqual({ ...values, data: { url: 'https://push.example.org/_matrix/push/v1/notify' }, enabled: true });
    expect(read).not.toHaveProperty('device_id');
    expect(await store().deletePushers({ userId: legacy.user_id, devices: { deviceIds: ['PHONE'] }, includeEmail: false })).toBe(0);
    expect(await store().deletePushers({ userId: legacy.user_id, devices: { all: true }, includeEmail: false })).toBe(1);
  });

  it('take the device of the first update that has one, in the same document write', async () => {
    const user = '@legacy2:example.org';
    await db.collection<PusherDocument>('pushers').insertOne({ ...legacy, user_id: user });
    const { data_json: _json, ...values } = legacy;
    const update = { ...values, user_id: user, data: { url: 'https://push.example.org/_matrix/push/v1/notify' }, enabled: false, device_id: 'PHONE' };
    expect(await store().upsertPusher(update)).toBe('updated');
    const stored = await db.collection<PusherDocument>('pushers').findOne({ user_id: user }, { projection: { _id: 0 } });
    expect(stored).toEqual({ ...legacy, user_id: user, enabled: false, device_id: 'PHONE' });
    expect(await store().deletePushers({ userId: user, devices: { deviceIds: ['PHONE'] }, includeEmail: false })).toBe(1);
  });
});
