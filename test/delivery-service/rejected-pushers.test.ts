import { describe, expect, it } from 'vitest';
import { RejectedPushers } from '../../src/delivery-service/rejected-pushers.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StoredPusher } from '../../src/pushers/pusher.js';
import type { RejectedRegistration } from '../../src/pushers/rejected-registration.js';
import type { ChangeEvent } from '../../src/service/push-service.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError } from '../../src/store/push-store.js';

const SILENT = createLogger('silent');
const OLD_GATEWAY = 'https://old-push.example.org/_matrix/push/v1/notify';
const NEW_GATEWAY = 'https://new-push.example.org/_matrix/push/v1/notify';
const ALICE = '@a:x.org';
const REJECTED: RejectedRegistration = {
  userId: ALICE,
  appId: 'org.example.app',
  pushkey: 'k',
  url: OLD_GATEWAY,
  setAtMost: 1_700_000_000_999,
};
/** No waiting between attempts: the schedule is not what these tests are about. */
const noPause = async () => Promise.resolve();

describe('removing a rejected pusher', () => {
  function aRemover(
    options: { readonly deleted?: boolean; readonly confirmAfter?: number; readonly bumpFails?: boolean } = {},
  ) {
    const calls: string[] = [];
    const announced: ChangeEvent[] = [];
    const droppedHere: string[] = [];
    let unconfirmed = options.confirmAfter ?? 0;
    const remover = new RejectedPushers(
      {
        deleteRejectedPusher: async (rejected) => {
          calls.push(`delete ${rejected.userId} ${rejected.appId} ${rejected.pushkey} ${rejected.url}`);
          return Promise.resolve(options.deleted ?? true);
        },
        bumpPushersVersion: async (userId) => {
          calls.push(`bump ${userId}`);
          if (options.bumpFails === true) throw new StoreUnavailableError('the store is away');
          return Promise.resolve(7);
        },
      },
      async (change) => {
        await Promise.resolve();
        if (unconfirmed > 0) {
          unconfirmed -= 1;
          return false;
        }
        announced.push(change);
        return true;
      },
      SILENT,
      { droppedHere: (userId) => droppedHere.push(userId), pause: noPause },
    );
    return { remover, calls, announced, droppedHere };
  }

  it('deletes exactly that registration, bumps the pushers version and announces it', async () => {
    const { remover, calls, announced, droppedHere } = aRemover();
    await remover.removeRejected(REJECTED);
    expect(calls).toEqual([`delete ${ALICE} org.example.app k ${OLD_GATEWAY}`, `bump ${ALICE}`]);
    expect(announced).toEqual([{ user_id: ALICE, type: 'm.pushers', version: 7 }]);
    expect(droppedHere).toEqual([ALICE]);
  });

  it('announces nothing when the pusher was already gone, or is another registration now', async () => {
    const { remover, calls, announced, droppedHere } = aRemover({ deleted: false });
    await remover.removeRejected(REJECTED);
    expect(calls).toEqual([`delete ${ALICE} org.example.app k ${OLD_GATEWAY}`]);
    expect(announced).toEqual([]);
    expect(droppedHere).toEqual([]);
  });

  it('tries the announcement again when the broker did not confirm it', async () => {
    const { remover, announced } = aRemover({ confirmAfter: 1 });
    await remover.removeRejected(REJECTED);
    expect(announced).toHaveLength(1);
  });

  it('this worker drops the user from its caches at once, even when no event can be published', async () => {
    const { remover, announced, droppedHere, calls } = aRemover({ bumpFails: true });
    await remover.removeRejected(REJECTED);
    expect(announced).toEqual([]);
    // Other workers are left to their pusher cache's age bound.
    expect(droppedHere).toEqual([ALICE]);
    expect(calls.filter((call) => call.startsWith('bump'))).toHaveLength(6);
  });
});

/**
 * A gateway's rejection is about the registration the request was sent
 * for. The app may move the same pushkey to another gateway, or register it
 * again, while that request is in flight: the old gateway's rejection must
 * not delete the newer registration.
 */
describe('a rejection against the stored pusher', () => {
  const aPusher = (url: string): StoredPusher => ({
    user_id: ALICE,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'k',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url },
    enabled: true,
  });

  it.each<[string, string, number, boolean]>([
    ['the registration the request was sent for is removed', OLD_GATEWAY, 0, true],
    ['a pusher moved to a new gateway since is kept', NEW_GATEWAY, 0, false],
    ['a pusher registered again at the same gateway since is kept', OLD_GATEWAY, 5_000, false],
  ])('%s', async (_case, urlNow, registeredAgainAfterMs, removed) => {
    const clock = { now: 1_700_000_000_000 };
    const store = new InMemoryPushStore({ now: () => clock.now });
    await store.upsertPusher(aPusher(OLD_GATEWAY));
    // The request is planned with that registration (its pushkey_ts: this second).
    const rejected = { ...REJECTED, setAtMost: clock.now + 999 };
    clock.now += registeredAgainAfterMs;
    if (urlNow !== OLD_GATEWAY || registeredAgainAfterMs > 0)
      await store.upsertPusher({ ...aPusher(urlNow), device_display_name: 'Phone, again' });
    const announced: ChangeEvent[] = [];
    const remover = new RejectedPushers(
      store,
      async (change) => {
        announced.push(change);
        return Promise.resolve(true);
      },
      SILENT,
    );

    await remover.removeRejected(rejected);

    expect((await store.listPushers(ALICE)).map((p) => p.data.url)).toEqual(removed ? [] : [urlNow]);
    expect(announced).toHaveLength(removed ? 1 : 0);
  });
});
