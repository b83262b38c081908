import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { MongoPushStore, type AccountDataDocument, type PusherDocument } from '../../src/store/mongo-push-store.js';
import { MongoImportStore } from '../../src/store/mongo-import-store.js';
import { importStoreContract } from '../store/import-store-contract.js';
import { pushStoreContract } from '../store/push-store-contract.js';

const client = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000, monitorCommands: true });
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
for (const [name, parsedCacheChars] of [
  ['MongoDB', 0],
  ['MongoDB with the parsed-rules cache', 1 << 20],
] as const) {
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

// The import's writes beside the worker's, on the same collections.
importStoreContract('MongoDB', async () => {
  await Promise.resolve();
  const pushStore = new MongoPushStore(db, options);
  const importStore = new MongoImportStore(db, options);
  return {
    store: Object.assign(pushStore, { importUsers: importStore.importUsers.bind(importStore) }),
    markImportUnfinished: async (userId) => {
      await db
        .collection('account_data')
        .updateOne({ _id: userId } as never, { $set: { import_pending: 'an earlier run' } });
    },
  };
});

describe('MongoImportStore: an import racing a worker\u2019s first write of the user', () => {
  it('lets one of them win whole: the import loses the compare-and-set (or finds the data there) and writes nothing, or the worker loses', async () => {
    const store = new MongoImportStore(db, options);
    const worker = new MongoPushStore(db, options);
    for (let round = 0; round < 5; round += 1) {
      const user = `@race${Date.now()}x${round}:example.org`;
      const pusher = {
        user_id: user,
        kind: 'http' as const,
        app_id: 'org.example.app',
        pushkey: 'imported',
        app_display_name: 'App',
        device_display_name: 'Phone',
        lang: 'en',
        data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
        enabled: true,
      };
      const imported = {
        userId: user,
        ruleset: serverDefaultRuleset(user),
        defaultsRevision: 'v1.19',
        pushers: [pusher],
      };
      const own = { ...serverDefaultRuleset(user), room: [] };
      const [[outcome], saved] = await Promise.all([
        store.importUsers([imported], { overwrite: false }),
        worker.savePushRules(user, 0, own, 'v1.19'),
      ]);
      const loaded = await worker.loadPushRules(user);
      if (saved.saved) {
        expect(['conflict', 'present']).toContain(outcome?.status);
        expect(loaded.lookup).toMatchObject({ event: { content: { global: own } } });
        expect(await worker.listPushers(user)).toEqual([]);
      } else {
        expect(outcome?.status).toBe('imported');
        expect(loaded.lookup).toMatchObject({ event: { content: { global: imported.ruleset } } });
        expect((await worker.listPushers(user)).map((p) => p.pushkey)).toEqual(['imported']);
      }
    }
  });
});

describe('MongoPushStore: push-rule reads that come in together', () => {
  it('answers each user as a read of that user alone would, present, absent or unreadable, in one query per turn', async () => {
    const store = new MongoPushStore(db, { ...options, readBatchSize: 4 });
    const users = Array.from({ length: 11 }, (_, k) => `@batch${k}:example.org`);
    for (const [k, user] of users.entries()) {
      if (k % 3 === 2) continue; // absent
      if (k === 4) {
        await db
          .collection<AccountDataDocument>('account_data')
          .insertOne({ _id: user, version: 7, push_rules: { content_json: '{not json', defaults_revision: 'v1.19' } });
        continue;
      }
      await store.savePushRules(user, 0, serverDefaultRuleset(user), 'v1.19');
    }
    const alone: unknown[] = [];
    for (const user of users) alone.push(await store.loadPushRules(user));
    const commands: string[] = [];
    const listener = (event: { commandName: string }) => commands.push(event.commandName);
    client.on('commandStarted', listener);
    try {
      // Twice the same user too: both get the answer.
      const together = await Promise.all([...users, users[0] ?? ''].map(async (user) => store.loadPushRules(user)));
      expect(together).toEqual([...alone, alone[0]]);
    } finally {
      client.off('commandStarted', listener);
    }
    // The first read goes alone; the 11 other users (the first again among them) in batches of 4, 4 and 3; the 3 absent ones read again alone.
    expect(commands.filter((name) => name === 'find').length).toBe(1 + 3 + 3);
  });
});

describe('MongoPushStore: pusher reads that come in together', () => {
  const pusherOf = (userId: string, appId: string, pushkey: string) => ({
    user_id: userId,
    app_id: appId,
    pushkey,
    kind: 'http' as const,
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    enabled: true,
  });

  it.each([
    ['in one query', 1000],
    ['alone when they do not fit in its first batch', 3],
  ])('answers each user as a read of that user alone would: %s', async (_name, pusherBatchDocs) => {
    const store = new MongoPushStore(db, { ...options, pusherBatchDocs });
    const users = Array.from({ length: 5 }, (_, k) => `@pushers${pusherBatchDocs}-${k}:example.org`);
    for (const [k, user] of users.entries()) {
      for (let n = 0; n < k; n += 1) await store.upsertPusher(pusherOf(user, `app.${(n * 7) % 5}`, `key-${k}-${n}`));
    }
    const alone: unknown[] = [];
    for (const user of users) alone.push(await store.listPushers(user));
    expect(alone.map((p) => (p as unknown[]).length)).toEqual([0, 1, 2, 3, 4]);
    const together = await Promise.all([...users, ...users].map(async (user) => store.listPushers(user)));
    expect(together).toEqual([...alone, ...alone]);
  });
});

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
    expect(read).toStrictEqual({
      ...values,
      data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
      enabled: true,
    });
    expect(read).not.toHaveProperty('device_id');
    expect(
      await store().deletePushers({ userId: legacy.user_id, devices: { deviceIds: ['PHONE'] }, includeEmail: false }),
    ).toBe(0);
    expect(await store().deletePushers({ userId: legacy.user_id, devices: { all: true }, includeEmail: false })).toBe(
      1,
    );
  });

  it('take the device of the first update that has one, in the same document write', async () => {
    const user = '@legacy2:example.org';
    await db.collection<PusherDocument>('pushers').insertOne({ ...legacy, user_id: user });
    const { data_json: _json, ...values } = legacy;
    const update = {
      ...values,
      user_id: user,
      data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
      enabled: false,
      device_id: 'PHONE',
    };
    expect(await store().upsertPusher(update)).toBe('updated');
    const stored = await db
      .collection<PusherDocument>('pushers')
      .findOne({ user_id: user }, { projection: { _id: 0 } });
    // Dated by its own write after the update (see the contract's ts cases).
    expect(stored).toEqual({
      ...legacy,
      user_id: user,
      enabled: false,
      device_id: 'PHONE',
      ts: expect.any(Number) as number,
    });
    expect(await store().deletePushers({ userId: user, devices: { deviceIds: ['PHONE'] }, includeEmail: false })).toBe(
      1,
    );
  });
});
