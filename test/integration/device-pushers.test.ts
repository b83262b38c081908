import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/service/command.js';
import { MongoPushStore } from '../../src/store/mongo-push-store.js';
import type { PushStore } from '../../src/store/push-store.js';
import { PushService } from '../../src/service/push-service.js';
import { aPusherSetAction } from '../support/builders.js';
import { allInterleavings } from '../support/pusher-interleavings.js';
import { action, aUser, h, pushers, pushkeys, send, useDevicePushersWorld } from './support/device-pushers-world.js';
import { TEST_LIMITS } from './support/worker-harness.js';

// set_pusher by device. The homeserver ops that delete pushers and user data are in
// device-pushers-deletion.test.ts.

useDevicePushersWorld();

describe('set_pusher records the device of the token', () => {
  it('lists it under both names, with enabled; a device_id the client sends is ignored', async () => {
    const user = aUser();
    const sent = aPusherSetAction({ pushkey: 'k' });
    const forged = { ...sent, device_id: 'FORGED', 'org.matrix.msc3881.device_id': 'FORGED' };
    expect(await send('set_pusher', user, { device_id: 'PHONE', action: forged })).toEqual({ ok: true, body: {} });
    expect(await pushers(user)).toEqual([
      {
        ...sent,
        enabled: true,
        'org.matrix.msc3881.enabled': true,
        device_id: 'PHONE',
        'org.matrix.msc3881.device_id': 'PHONE',
      },
    ]);
  });

  it('keeps the device of a pusher updated from another device', async () => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k') });
    await send('set_pusher', user, { device_id: 'LAPTOP', action: action('k', { lang: 'de' }) });
    expect(await pushers(user)).toMatchObject([
      { lang: 'de', device_id: 'PHONE', 'org.matrix.msc3881.device_id': 'PHONE' },
    ]);
  });

  it.each([['enabled'], ['org.matrix.msc3881.enabled']])('enabled: false round-trips under %s', async (name) => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k', { [name]: false }) });
    expect(await pushers(user)).toMatchObject([{ enabled: false, 'org.matrix.msc3881.enabled': false }]);
  });

  it('takes back a pusher object from get_pushers with one name changed, as Element toggles a session', async () => {
    const user = aUser();
    await send('set_pusher', user, { device_id: 'PHONE', action: action('k') });
    const [listed] = await pushers(user);
    expect(
      await send('set_pusher', user, {
        device_id: 'LAPTOP',
        action: { ...listed, 'org.matrix.msc3881.enabled': false },
      }),
    ).toEqual({ ok: true, body: {} });
    expect(await pushers(user)).toMatchObject([
      { enabled: false, 'org.matrix.msc3881.enabled': false, device_id: 'PHONE' },
    ]);
  });

  it('reads a pusher stored before devices were recorded as enabled, of an unknown device, until an update gives it one', async () => {
    const user = aUser();
    await h.db.collection('pushers').insertOne({
      user_id: user,
      app_id: 'org.example.app',
      pushkey: 'old',
      kind: 'http',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data_json: '{"url":"https://push.example.org/_matrix/push/v1/notify"}',
    });
    // Moved into the user's list as a worker's start-up does.
    await new MongoPushStore(h.db, {
      accountDataCollection: 'account_data',
      pushersCollection: 'pushers',
    }).ensureIndexes();
    const [legacy] = await pushers(user);
    expect(legacy).toMatchObject({ pushkey: 'old', enabled: true, 'org.matrix.msc3881.enabled': true });
    expect(legacy).not.toHaveProperty('device_id');
    expect(await send('delete_pushers', user, { device_ids: ['PHONE'] })).toEqual({ ok: true, body: { deleted: 0 } });
    await send('set_pusher', user, { device_id: 'PHONE', action: action('old', { app_id: 'org.example.app' }) });
    expect(await pushers(user)).toMatchObject([{ pushkey: 'old', device_id: 'PHONE' }]);
    expect(await send('delete_pushers', user, { device_ids: ['PHONE'] })).toEqual({ ok: true, body: { deleted: 1 } });
  });
});

describe('a pusher the push gateway rejected', () => {
  it("is removed with set_pusher kind: null for its user; another user's pusher with the same pushkey stays", async () => {
    const user = aUser();
    const other = aUser();
    const pushkey = `rejected-${randomUUID()}`;
    await send('set_pusher', user, { device_id: 'PHONE', action: action(pushkey) });
    await send('set_pusher', other, { device_id: 'TABLET', action: action(pushkey, { append: true }) });
    await send('set_pusher', user, { device_id: 'PHONE', action: action('kept') });
    const removal = { action: { kind: null, app_id: 'org.example.app', pushkey } };
    expect(await send('set_pusher', user, removal, randomUUID())).toEqual({ ok: true, body: {} });
    expect(await pushkeys(user)).toEqual(['kept']);
    expect(await pushkeys(other)).toEqual([pushkey]);
  });
});

describe('set_pusher and delete_pushers for the same device, concurrently, on MongoDB', () => {
  const user = '@interleaved:example.org';
  const store = () =>
    new MongoPushStore(h.db, {
      accountDataCollection: 'interleaved_account_data',
      pushersCollection: 'interleaved_pushers',
    });
  const service = {
    maxWriteAttempts: 12,
    backoff: { baseMs: 2, maxMs: 20 },
    pusherPolicy: { allowInsecureGateways: false },
    limits: TEST_LIMITS,
  };
  const setPusher = (pushkey: string, deviceId?: string, overrides: Record<string, unknown> = {}): Command => ({
    op: 'set_pusher',
    userId: user,
    action: { ...aPusherSetAction({ pushkey }), ...overrides },
    ...(deviceId === undefined ? {} : { deviceId }),
  });
  const deletePushers = (devices: { deviceIds: string[] } | { exceptDeviceId: string }): Command => ({
    op: 'delete_pushers',
    userId: user,
    devices,
    includeEmail: false,
  });
  const snapshot = async (s: PushStore) =>
    (await s.listPushers(user)).map((p) => ({ pushkey: p.pushkey, lang: p.lang, device: p.device_id ?? null }));
  const storeWith = (existing: Command) => async (): Promise<PushStore> => {
    await h.db.collection('interleaved_pushers').deleteMany({});
    await h.db.collection('interleaved_account_data').deleteMany({});
    const fresh = store();
    await fresh.ensureIndexes();
    await new PushService(fresh, service).handle(existing);
    return fresh;
  };

  it.each<[string, Command, Command, Command]>([
    [
      'an update from another device and the logout of the creating device',
      setPusher('k', 'PHONE'),
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ deviceIds: ['PHONE'] }),
    ],
    [
      'the kept device taking a pusher of an unknown device during a password change',
      setPusher('k'),
      setPusher('k', 'LAPTOP', { lang: 'de' }),
      deletePushers({ exceptDeviceId: 'LAPTOP' }),
    ],
  ])('%s end as one of the two orders would leave them', async (_case, existing, set, remove) => {
    const { sequential, interleaved } = await allInterleavings({
      fresh: storeWith(existing),
      service,
      first: set,
      second: remove,
      snapshot,
    });
    expect(interleaved.length).toBeGreaterThan(3);
    for (const run of interleaved) expect(sequential, run.label).toContainEqual(run.state);
  });
});
