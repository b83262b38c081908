import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { MongoPushStore } from '../../src/store/mongo-push-store.js';
import type { AccountDataDocument } from '../../src/store/account-data-document.js';
import type { PusherDocument } from '../../src/store/mongo-pusher-lists.js';
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
    store: Object.assign(pushStore, {
      importUsers: importStore.importUsers.bind(importStore),
      finishImports: importStore.finishImports.bind(importStore),
    }),
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

  it('answers each user as a read of that user alone would', async () => {
    const store = new MongoPushStore(db, options);
    const users = Array.from({ length: 5 }, (_, k) => `@pushers-${k}:example.org`);
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

describe('MongoDB: pushers of the old layout (one document per pusher), and before devices and enabled were kept', () => {
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
  /** Old-layout documents in the old collection, then the start-up migration. */
  const migrate = async (...docs: PusherDocument[]) => {
    await db.collection<PusherDocument>('pushers').insertMany(docs.map((doc) => ({ ...doc })));
    return new MongoPushStore(db, { ...options, migrationBatchSize: 2 }).ensureIndexes();
  };

  it('read as enabled, of an unknown device; a logout of any device keeps them, log out everywhere removes them', async () => {
    expect(await migrate(legacy)).toBe(1);
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

  it('take the device of the first update that has one, in the same write', async () => {
    const user = '@legacy2:example.org';
    await migrate({ ...legacy, user_id: user });
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
      .collection<AccountDataDocument>('account_data')
      .findOne({ _id: user }, { projection: { pushers: 1 } });
    const { user_id: _owner, ...entry } = legacy;
    expect(stored?.pushers).toEqual([
      { ...entry, enabled: false, device_id: 'PHONE', ts: expect.any(Number) as number },
    ]);
    expect(await store().deletePushers({ userId: user, devices: { deviceIds: ['PHONE'] }, includeEmail: false })).toBe(
      1,
    );
  });

  it('are moved into their users\u2019 lists at start-up, in batches, once: found by every read, by app ID and pushkey too', async () => {
    const [a, b, c] = ['@move-a:example.org', '@move-b:example.org', '@move-c:example.org'];
    const moved = await migrate(
      { ...legacy, user_id: a, pushkey: 'a1', ts: 5, device_id: 'PHONE', enabled: false },
      { ...legacy, user_id: a, pushkey: 'a2' },
      { ...legacy, user_id: a, app_id: 'a.app', pushkey: 'a3' },
      { ...legacy, user_id: b, pushkey: 'shared' },
      { ...legacy, user_id: c, pushkey: 'shared' },
    );
    expect(moved).toBe(5);
    expect(await db.collection('pushers').countDocuments({})).toBe(0);
    const lists = await store().listPushersOfUsers([a, b, c]);
    expect(lists.get(a)?.map((p) => [p.app_id, p.pushkey, p.ts, p.device_id, p.enabled])).toEqual([
      ['a.app', 'a3', undefined, undefined, true],
      ['org.example.app', 'a1', 5, 'PHONE', false],
      ['org.example.app', 'a2', undefined, undefined, true],
    ]);
    expect(await store().listPushers(a)).toEqual(lists.get(a));
    expect(lists.get(b)).toHaveLength(1);
    // Idempotent: a second start moves nothing and changes nothing.
    expect(await store().ensureIndexes()).toBe(0);
    expect(await store().listPushersOfUsers([a, b, c])).toEqual(lists);
    // The owners of each key were recorded: `append: false` finds the other user.
    expect(await store().deletePushersOfOtherUsers({ userId: b, appId: 'org.example.app', pushkey: 'shared' })).toEqual(
      [c],
    );
    expect(await store().listPushers(c)).toEqual([]);
    expect(await store().listPushers(b)).toHaveLength(1);
  });

  it('are not merged twice: an old document left by a stopped run does not bring back a pusher deleted since', async () => {
    const user = '@move-twice:example.org';
    await migrate({ ...legacy, user_id: user });
    expect(await store().deletePusher({ userId: user, appId: legacy.app_id, pushkey: legacy.pushkey })).toBe(true);
    await migrate({ ...legacy, user_id: user });
    expect(await store().listPushers(user)).toEqual([]);
  });
});

describe('MongoPushStore: every pusher read and the pushkey owners are looked up by a unique key (_id)', () => {
  const pusherOf = (userId: string, pushkey: string) => ({
    user_id: userId,
    app_id: 'org.example.shape',
    pushkey,
    kind: 'http' as const,
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    enabled: true,
  });

  interface Seen {
    readonly name: string;
    readonly collection: unknown;
    readonly filter: unknown;
  }
  /** The filters of the commands `action` sends: find's, and each update's and delete's. */
  async function commandsOf(action: () => Promise<unknown>): Promise<Seen[]> {
    const seen: Seen[] = [];
    const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
      const { commandName: name, command } = event;
      const collection = command[name];
      if (name === 'find') seen.push({ name, collection, filter: command['filter'] });
      if (name === 'update')
        for (const u of command['updates'] as { q: unknown }[]) seen.push({ name, collection, filter: u.q });
      if (name === 'delete')
        for (const d of command['deletes'] as { q: unknown }[]) seen.push({ name, collection, filter: d.q });
      if (name === 'findAndModify') seen.push({ name, collection, filter: command['query'] });
    };
    client.on('commandStarted', listener);
    try {
      await action();
    } finally {
      client.off('commandStarted', listener);
    }
    return seen;
  }
  const idIn = { _id: { $in: expect.any(Array) as unknown[] } };
  const byId = { _id: expect.any(String) as string };

  it('listPushersOfUsers: only finds on the account data whose filter is {_id: {$in: [...]}}, one per 1,000 users', async () => {
    const store = new MongoPushStore(db, options);
    const users = Array.from({ length: 2_500 }, (_, k) => `@shape${k}:example.org`);
    for (const user of users.slice(0, 3)) await store.upsertPusher(pusherOf(user, `k-${user}`));
    const seen = await commandsOf(async () => store.listPushersOfUsers(users));
    expect(seen).toEqual([
      { name: 'find', collection: 'account_data', filter: idIn },
      { name: 'find', collection: 'account_data', filter: idIn },
      { name: 'find', collection: 'account_data', filter: idIn },
    ]);
    expect(seen.map((s) => (s.filter as { _id: { $in: unknown[] } })._id.$in.length)).toEqual([1000, 1000, 500]);
  });

  it('listPushers: finds on the account data by _id (alone) or _id $in (reads that come in together)', async () => {
    const store = new MongoPushStore(db, options);
    const users = Array.from({ length: 6 }, (_, k) => `@shape-one${k}:example.org`);
    for (const user of users) await store.upsertPusher(pusherOf(user, `k-${user}`));
    const seen = await commandsOf(async () => Promise.all(users.map(async (user) => store.listPushers(user))));
    expect(seen.length).toBeGreaterThan(0);
    for (const command of seen) {
      expect(command).toEqual({ name: 'find', collection: 'account_data', filter: expect.anything() as unknown });
      expect([byId, idIn]).toContainEqual(command.filter);
    }
  });

  it('writes and append: false: every filter is an _id (with the revision of a compare-and-set), nothing on the old collection', async () => {
    const store = new MongoPushStore(db, options);
    const [a, b] = ['@shape-w1:example.org', '@shape-w2:example.org'];
    const seen = await commandsOf(async () => {
      await store.upsertPusher(pusherOf(a, 'shared'));
      await store.upsertPusher(pusherOf(b, 'shared'));
      await store.upsertPusher({ ...pusherOf(b, 'shared'), lang: 'de' });
      expect(
        await store.deletePushersOfOtherUsers({ userId: a, appId: 'org.example.shape', pushkey: 'shared' }),
      ).toEqual([b]);
      await store.deletePushers({ userId: a, devices: { all: true }, includeEmail: true });
    });
    expect(seen.length).toBeGreaterThan(0);
    for (const command of seen) {
      expect(['account_data', 'pushers_by_key']).toContain(command.collection);
      const filter = command.filter as Record<string, unknown>;
      expect(Object.keys(filter).filter((k) => k !== 'pushers_rev' && k !== 'rev')).toEqual(['_id']);
      expect([byId, idIn]).toContainEqual({ _id: filter['_id'] });
    }
    expect(await store.listPushers(a)).toEqual([]);
    expect(await store.listPushers(b)).toEqual([]);
  });
});
