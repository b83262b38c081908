import { describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import type { RawPusherSetAction } from '../../src/pushers/decide-pusher-set.js';
import type { DeviceSelector } from '../../src/pushers/pusher-deletion.js';
import type { WirePusher } from '../../src/pushers/pusher.js';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { allInterleavings } from '../support/pusher-interleavings.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * Pushers follow devices (issue 15): the device that created a pusher, its
 * `enabled` flag, and the homeserver ops that remove pushers on logout,
 * password change and deactivation.
 */
const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
const BOB = '@bob:example.org';

const action = (pushkey: string, overrides: Partial<RawPusherSetAction> = {}): RawPusherSetAction => ({
  kind: 'http',
  app_id: 'org.example.app',
  pushkey,
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
  ...overrides,
});
const emailAction = (address: string): RawPusherSetAction => ({
  kind: 'email',
  app_id: 'm.email',
  pushkey: address,
  app_display_name: 'E-mail',
  device_display_name: address,
  lang: 'en',
  data: {},
});
const setPusher = (
  pushkey: string,
  deviceId?: string,
  overrides: Partial<RawPusherSetAction> = {},
  userId = ALICE,
): Command =>
  deviceId === undefined
    ? { op: 'set_pusher', userId, action: action(pushkey, overrides) }
    : { op: 'set_pusher', userId, action: action(pushkey, overrides), deviceId };
const deletePushers = (devices: DeviceSelector, includeEmail = false, userId = ALICE): Command => ({
  op: 'delete_pushers',
  userId,
  devices,
  includeEmail,
});

function setup() {
  const store = new InMemoryPushStore();
  const service = new PushService(store, OPTIONS);
  const run = async (command: Command, messageId?: string) =>
    service.handle(command, messageId === undefined ? {} : { messageId });
  const pushers = async (userId = ALICE) => {
    const outcome = await run({ op: 'get_pushers', userId });
    if (!outcome.reply.ok) throw new Error('get_pushers failed');
    return (outcome.reply.body as { pushers: WirePusher[] }).pushers;
  };
  const pushkeys = async (userId = ALICE) => (await pushers(userId)).map((p) => p.pushkey).sort();
  return { store, service, run, pushers, pushkeys };
}

describe('set_pusher: the device and enabled', () => {
  it('records the device of a new pusher and lists it under both names', async () => {
    const { run, pushers } = setup();
    await run(setPusher('k', 'PHONE'));
    expect(await pushers()).toEqual([
      expect.objectContaining({
        pushkey: 'k',
        enabled: true,
        'org.matrix.msc3881.enabled': true,
        device_id: 'PHONE',
        'org.matrix.msc3881.device_id': 'PHONE',
      }),
    ]);
  });

  it('keeps the device on an update from another device', async () => {
    const { run, pushers } = setup();
    await run(setPusher('k', 'PHONE'));
    expect((await run(setPusher('k', 'LAPTOP', { lang: 'de' }))).changes?.[0]).toMatchObject({
      type: 'm.pushers',
      version: 2,
    });
    expect(await pushers()).toMatchObject([{ lang: 'de', device_id: 'PHONE' }]);
  });

  it('never shows when a pusher was stored (ts) in get_pushers: exactly the pusher’s fields', async () => {
    const { run, pushers, store } = setup();
    await run(setPusher('k', 'PHONE'));
    expect((await store.listPushers(ALICE))[0]?.ts).toEqual(expect.any(Number));
    const [listed] = await pushers();
    expect(listed).not.toHaveProperty('ts');
    expect(Object.keys(listed ?? {}).sort()).toEqual([
      'app_display_name',
      'app_id',
      'data',
      'device_display_name',
      'device_id',
      'enabled',
      'kind',
      'lang',
      'org.matrix.msc3881.device_id',
      'org.matrix.msc3881.enabled',
      'pushkey',
    ]);
  });

  it("ignores a device_id in the client's action", async () => {
    const { run, pushers } = setup();
    const forged = {
      ...action('k'),
      device_id: 'FORGED',
      'org.matrix.msc3881.device_id': 'FORGED',
    } as RawPusherSetAction;
    await run({ op: 'set_pusher', userId: ALICE, action: forged, deviceId: 'PHONE' });
    await run({ op: 'set_pusher', userId: ALICE, action: { ...forged, pushkey: 'no-device' } });
    const listed = await pushers();
    const withDevice = listed.find((p) => p.pushkey === 'k');
    const noDevice = listed.find((p) => p.pushkey === 'no-device');
    expect(withDevice).toMatchObject({ pushkey: 'k', device_id: 'PHONE', 'org.matrix.msc3881.device_id': 'PHONE' });
    expect(noDevice).not.toHaveProperty('device_id');
    expect(noDevice).not.toHaveProperty('org.matrix.msc3881.device_id');
  });

  it.each([['enabled'], ['org.matrix.msc3881.enabled']])(
    'enabled: false round-trips under %s, and both names list it',
    async (name) => {
      const { run, pushers } = setup();
      await run(setPusher('k', 'PHONE', { [name]: false }));
      expect(await pushers()).toMatchObject([{ enabled: false, 'org.matrix.msc3881.enabled': false }]);
      // An update that does not say it is enabled again (MSC3881's default).
      await run(setPusher('k', 'PHONE'));
      expect(await pushers()).toMatchObject([{ enabled: true, 'org.matrix.msc3881.enabled': true }]);
    },
  );

  it('a pusher object from get_pushers posted back with one name changed toggles it (as Element does), from another device', async () => {
    const { run, pushers } = setup();
    await run(setPusher('k', 'PHONE'));
    const [listed] = await pushers();
    // Element: {...pusher, [PUSHER_ENABLED.name]: false} — the unstable name; the stable one keeps the old value.
    const off = { ...listed, 'org.matrix.msc3881.enabled': false } as RawPusherSetAction;
    expect((await run({ op: 'set_pusher', userId: ALICE, action: off, deviceId: 'LAPTOP' })).reply).toEqual({
      ok: true,
      body: {},
    });
    expect(await pushers()).toMatchObject([{ enabled: false, device_id: 'PHONE' }]);
    const [disabled] = await pushers();
    await run({ op: 'set_pusher', userId: ALICE, action: { ...disabled, enabled: true }, deviceId: 'LAPTOP' });
    expect(await pushers()).toMatchObject([{ enabled: true, 'org.matrix.msc3881.enabled': true, device_id: 'PHONE' }]);
  });
});

describe('delete_pushers', () => {
  async function seeded() {
    const world = setup();
    await world.run(setPusher('phone', 'PHONE'));
    await world.run(setPusher('laptop', 'LAPTOP'));
    await world.run(setPusher('legacy'));
    await world.run({ op: 'set_pusher', userId: ALICE, action: emailAction('alice@example.org'), deviceId: 'PHONE' });
    await world.run(setPusher('bobs-phone', 'PHONE', {}, BOB));
    return world;
  }

  it.each<[string, DeviceSelector, boolean, number, string[]]>([
    ['logout of a device', { deviceIds: ['PHONE'] }, false, 1, ['alice@example.org', 'laptop', 'legacy']],
    ['deletion of devices', { deviceIds: ['PHONE', 'LAPTOP'] }, false, 2, ['alice@example.org', 'legacy']],
    [
      'a password change that logs out the other devices',
      { exceptDeviceId: 'PHONE' },
      false,
      2,
      ['alice@example.org', 'phone'],
    ],
    ['a logout everywhere', { all: true }, false, 3, ['alice@example.org']],
    ['a deactivation', { all: true }, true, 4, []],
    [
      'a logout with include_email: e-mail pushers have no device, so it keeps them',
      { deviceIds: ['PHONE'] },
      true,
      1,
      ['alice@example.org', 'laptop', 'legacy'],
    ],
    ['a password change with include_email', { exceptDeviceId: 'PHONE' }, true, 3, ['phone']],
  ])('%s: replies how many went, announces one change', async (_case, devices, includeEmail, deleted, left) => {
    const { run, pushkeys } = await seeded();
    const outcome = await run(deletePushers(devices, includeEmail));
    expect(outcome).toEqual({
      reply: { ok: true, body: { deleted } },
      changes: [{ user_id: ALICE, type: 'm.pushers', version: 5 }],
      conflicts: 0,
    });
    expect(await pushkeys()).toEqual(left);
    expect(await pushkeys(BOB)).toEqual(['bobs-phone']);
  });

  it('keeps e-mail pushers unless asked, and deletes them when asked', async () => {
    const { run, pushkeys, pushers } = setup();
    await run({ op: 'set_pusher', userId: ALICE, action: emailAction('alice@example.org'), deviceId: 'PHONE' });
    // The account's, not the device's: no device recorded.
    expect((await pushers())[0]).not.toHaveProperty('device_id');
    expect((await run(deletePushers({ deviceIds: ['PHONE'] }, true))).reply).toEqual({
      ok: true,
      body: { deleted: 0 },
    });
    expect((await run(deletePushers({ all: true }))).reply).toEqual({ ok: true, body: { deleted: 0 } });
    expect(await pushkeys()).toEqual(['alice@example.org']);
    expect((await run(deletePushers({ all: true }, true))).reply).toEqual({ ok: true, body: { deleted: 1 } });
    expect(await pushkeys()).toEqual([]);
  });

  it('deleting nothing announces nothing and bumps no version', async () => {
    const { run } = await seeded();
    const outcome = await run(deletePushers({ deviceIds: ['GONE'] }));
    expect(outcome).toEqual({ reply: { ok: true, body: { deleted: 0 } }, conflicts: 0, unchanged: true });
    expect((await run(deletePushers({ deviceIds: ['PHONE'] }))).changes?.[0]).toMatchObject({ version: 5 });
  });

  it('a retry with the same messageId replies the same and deletes nothing more', async () => {
    const { run, pushkeys } = await seeded();
    const first = await run(deletePushers({ deviceIds: ['PHONE'] }), 'logout-1');
    // Meanwhile the device logs in again and registers its pusher.
    await run(setPusher('phone', 'PHONE'));
    const retry = await run(deletePushers({ deviceIds: ['PHONE'] }), 'logout-1');
    expect(first.reply).toEqual({ ok: true, body: { deleted: 1 } });
    // It changed the pushers: announced again, at their version now (the re-registration's).
    expect(retry).toEqual({
      reply: first.reply,
      conflicts: 0,
      replayed: true,
      changes: [{ user_id: ALICE, type: 'm.pushers', version: expect.any(Number) as number }],
    });
    expect(retry.changes?.[0]?.version).toBeGreaterThan(first.changes?.[0]?.version ?? Number.POSITIVE_INFINITY);
    expect(await pushkeys()).toContain('phone');
  });

  it('a retry of a deletion that found nothing replies the same, and announces the user again', async () => {
    const { run } = setup();
    // Found nothing, but with no record of its own it may be the retry of a
    // deletion whose record failed: announced all the same.
    expect((await run(deletePushers({ all: true }), 'nothing')).changes).toEqual([
      { user_id: ALICE, type: 'm.pushers', version: 0 },
    ]);
    await run(setPusher('k', 'PHONE'));
    expect(await run(deletePushers({ all: true }), 'nothing')).toEqual({
      reply: { ok: true, body: { deleted: 0 } },
      conflicts: 0,
      replayed: true,
      changes: [{ user_id: ALICE, type: 'm.pushers', version: 1 }],
    });
  });
});

describe('delete_user_data', () => {
  async function withData() {
    const world = setup();
    await world.run({ op: 'get_pushrules', userId: ALICE });
    await world.run({
      op: 'set_pushrule',
      userId: ALICE,
      request: { scope: 'global', kind: 'room', ruleId: '!r:example.org', body: { actions: [] } },
    });
    await world.run(setPusher('phone', 'PHONE'));
    await world.run({ op: 'set_pusher', userId: ALICE, action: emailAction('alice@example.org') });
    await world.run(setPusher('bobs', 'PHONE', {}, BOB));
    return world;
  }

  it('erases push rules and every pusher, announcing both with versions past the old ones', async () => {
    const { run, pushkeys } = await withData();
    const outcome = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    expect(outcome.reply).toEqual({ ok: true, body: {} });
    expect(outcome.changes).toEqual([
      { user_id: ALICE, type: 'm.push_rules', version: 3 },
      { user_id: ALICE, type: 'm.pushers', version: 3 },
    ]);
    expect(await pushkeys()).toEqual([]);
    expect(await pushkeys(BOB)).toEqual(['bobs']);
  });

  it('afterwards the user reads as one who never had data, and the next versions go on growing', async () => {
    const { run } = await withData();
    await run({ op: 'delete_user_data', userId: ALICE });
    const address = { scope: 'global', kind: 'room', ruleId: '!r:example.org' };
    expect((await run({ op: 'get_pushrule', userId: ALICE, address })).reply).toMatchObject({
      ok: false,
      error: { kind: 'NotFound', error: 'PushRules event not found.' },
    });
    const read = await run({ op: 'get_pushrules', userId: ALICE });
    expect(read.reply).toEqual({ ok: true, body: { global: serverDefaultRuleset(ALICE) } });
    // Stored again as a new user's defaults are, at the next version (not 1).
    expect(read.changes?.[0]).toEqual({ user_id: ALICE, type: 'm.push_rules', version: 4 });
    expect((await run(setPusher('k', 'PHONE'))).changes?.[0]).toEqual({
      user_id: ALICE,
      type: 'm.pushers',
      version: 4,
    });
  });

  it('a retry with the same messageId replays {} and erases nothing made since', async () => {
    const { run, pushkeys } = await withData();
    const first = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    await run(setPusher('new', 'PHONE'));
    const retry = await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    // It erased both: both are announced again at the versions now (another worker may still keep the rules).
    expect(retry).toEqual({
      reply: first.reply,
      conflicts: 0,
      replayed: true,
      changes: [
        { user_id: ALICE, type: 'm.push_rules', version: 3 },
        { user_id: ALICE, type: 'm.pushers', version: 4 },
      ],
    });
    expect(await pushkeys()).toEqual(['new']);
  });

  it('a copy of it that recorded first while it deleted (a redelivery beside it): replays, announcing both', async () => {
    const { store, run } = await withData();
    await run({ op: 'delete_user_data', userId: ALICE }, 'deactivate');
    let finds = 0;
    // The first look for the record comes before the copy has written it.
    const late = wrapStore(store, {
      findRecordedWrite: async (userId, messageId) =>
        (finds += 1) === 1 ? undefined : store.findRecordedWrite(userId, messageId),
    });
    const outcome = await new PushService(late, OPTIONS).handle(
      { op: 'delete_user_data', userId: ALICE },
      { messageId: 'deactivate' },
    );
    expect(outcome).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      replayed: true,
      changes: [
        { user_id: ALICE, type: 'm.push_rules', version: 3 },
        { user_id: ALICE, type: 'm.pushers', version: 3 },
      ],
    });
  });

  it('for a user without data: {} and no change event; with a messageId, a record a retry replays', async () => {
    const { store, run } = setup();
    expect(await run({ op: 'delete_user_data', userId: ALICE })).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      unchanged: true,
    });
    expect(await run({ op: 'delete_user_data', userId: ALICE }, 'm')).toEqual({
      reply: { ok: true, body: {} },
      conflicts: 0,
      unchanged: true,
    });
    expect(await run({ op: 'delete_user_data', userId: ALICE }, 'm')).toMatchObject({ replayed: true });
    expect(await store.loadPushRules(ALICE)).toEqual({ version: 0, lookup: { found: false } });
  });

  it('only pushers, or only rules: announces what changed', async () => {
    const rulesOnly = setup();
    await rulesOnly.run({ op: 'get_pushrules', userId: ALICE });
    expect((await rulesOnly.run({ op: 'delete_user_data', userId: ALICE })).changes).toEqual([
      { user_id: ALICE, type: 'm.push_rules', version: 2 },
    ]);
    const pushersOnly = setup();
    await pushersOnly.run(setPusher('k'));
    expect((await pushersOnly.run({ op: 'delete_user_data', userId: ALICE })).changes).toEqual([
      { user_id: ALICE, type: 'm.pushers', version: 2 },
    ]);
  });

  it('erases a corrupt push-rules entry too', async () => {
    const { store, run } = setup();
    store.putRawPushRules(ALICE, { contentJson: '{corrupt', defaultsRevision: 'v1.19' });
    expect((await run({ op: 'delete_user_data', userId: ALICE })).reply).toEqual({ ok: true, body: {} });
    expect(await store.loadPushRules(ALICE)).toEqual({ version: 2, lookup: { found: false } });
  });

  it('retries when another writer changes the push rules between its read and its erase', async () => {
    const store = new InMemoryPushStore();
    const base = new PushService(store, OPTIONS);
    await base.handle({ op: 'get_pushrules', userId: ALICE });
    let raced = false;
    const racing = wrapStore(store, {
      eraseUserData: async (u, v, erasure) => {
        if (!raced) {
          raced = true;
          await base.handle({
            op: 'set_pushrule_enabled',
            userId: ALICE,
            address: { scope: 'global', kind: 'override', ruleId: '.m.rule.master' },
            enabled: true,
          });
        }
        return store.eraseUserData(u, v, erasure);
      },
    });
    const outcome = await new PushService(racing, OPTIONS).handle({ op: 'delete_user_data', userId: ALICE });
    expect(outcome).toMatchObject({
      reply: { ok: true },
      conflicts: 1,
      changes: [{ type: 'm.push_rules', version: 3 }],
    });
    expect((await store.loadPushRules(ALICE)).lookup).toEqual({ found: false });
  });
});

describe('a pusher the push gateway rejected', () => {
  it("set_pusher kind: null removes that user's pusher only, whatever its device", async () => {
    const { run, pushkeys } = setup();
    await run(setPusher('shared', 'PHONE'));
    await run(setPusher('shared', 'BOBS-PHONE', { append: true }, BOB));
    await run(setPusher('other', 'PHONE'));
    const removal: Command = {
      op: 'set_pusher',
      userId: ALICE,
      action: { kind: null, app_id: 'org.example.app', pushkey: 'shared' },
    };
    expect((await run(removal, 'rejected-1')).changes?.[0]).toMatchObject({ type: 'm.pushers' });
    expect(await pushkeys()).toEqual(['other']);
    expect(await pushkeys(BOB)).toEqual(['shared']);
  });
});

describe('set_pusher and delete_pushers for the same device, concurrently', () => {
  const storeWith = (existing: Command) => async (): Promise<PushStore> => {
    const store = new InMemoryPushStore();
    await new PushService(store, OPTIONS).handle(existing);
    return store;
  };
  const snapshot = async (store: PushStore) =>
    (await store.listPushers(ALICE)).map((p) => ({
      pushkey: p.pushkey,
      lang: p.lang,
      device: p.device_id ?? null,
      enabled: p.enabled,
    }));
  const phonesPusher = setPusher('k', 'PHONE');

  it.each<[string, Command, Command, Command]>([
    [
      'an update from another device and the logout of the creating device',
      phonesPusher,
      setPusher('k', 'LAPTOP', { lang: 'de', enabled: false }),
      deletePushers({ deviceIds: ['PHONE'] }),
    ],
    [
      'a new pusher of the device and its logout',
      phonesPusher,
      setPusher('new', 'PHONE'),
      deletePushers({ deviceIds: ['PHONE'] }),
    ],
    [
      'an update from the kept device and a password change',
      phonesPusher,
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ exceptDeviceId: 'LAPTOP' }),
    ],
    // Both orders keep the pusher, bound to the laptop; a delete that read first and deleted by key later would not.
    [
      'the kept device taking a pusher of an unknown device during a password change',
      setPusher('k'),
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ exceptDeviceId: 'LAPTOP' }),
    ],
  ])(
    '%s end as one of the two orders would leave them, at every interleaving',
    async (_case, existing, set, remove) => {
      const { sequential, interleaved } = await allInterleavings({
        fresh: storeWith(existing),
        service: OPTIONS,
        first: set,
        second: remove,
        snapshot,
      });
      expect(interleaved.length).toBeGreaterThan(3);
      for (const run of interleaved) expect(sequential, run.label).toContainEqual(run.state);
    },
  );
});
