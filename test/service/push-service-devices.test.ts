import { describe, expect, it } from 'vitest';
import type { RawPusherSetAction } from '../../src/pushers/decide-pusher-set.js';
import type { DeviceSelector } from '../../src/pushers/pusher-deletion.js';
import type { Command } from '../../src/service/command.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { ALICE } from '../support/builders.js';
import { OPTIONS } from '../support/push-service-world.js';
import { action, BOB, emailAction, setPusher, setup } from '../support/pusher-devices-world.js';
import { allInterleavings } from '../support/pusher-interleavings.js';

/**
 * Pushers follow devices (issue 15): the device that created a pusher, its
 * `enabled` flag, and the homeserver ops that remove pushers on logout,
 * password change and deactivation.
 */
// delete_user_data, which erases all of a user's pushers and push rules, is in
// push-service-user-data.test.ts.

const deletePushers = (devices: DeviceSelector, includeEmail = false, userId = ALICE): Command => ({
  op: 'delete_pushers',
  userId,
  devices,
  includeEmail,
});

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
