import { describe, expect, it } from 'vitest';
import { CachedPusherLookup } from '../../src/delivery-service/cached-pusher-lookup.js';
import type { RawPusherSetAction } from '../../src/pushers/decide-pusher-set.js';
import type { Command } from '../../src/service/command.js';
import type { HandleOutcome } from '../../src/service/handle-outcome.js';
import { PushService, type PushServiceOptions } from '../../src/service/push-service.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { StoreUnavailableError, type PushStore } from '../../src/store/push-store.js';
import { ALICE } from '../support/builders.js';
import { DEFAULT_LIMITS } from '../support/default-config.js';
import { wrapStore } from '../support/store-doubles.js';

/**
 * Every pusher write announces every user whose pushers it touched, so that
 * the delivery pusher cache of every worker (which only a change event
 * drops, or its age bound) never keeps sending a user's notifications to a
 * pushkey they no longer have, or misses one they have. The changes a
 * request returns are applied to the cache the way `RequestEnvelope` applies
 * them on this worker and every other worker's change listener does.
 */
const OPTIONS: PushServiceOptions = {
  maxWriteAttempts: 4,
  backoff: { baseMs: 0, maxMs: 0 },
  pusherPolicy: { allowInsecureGateways: false },
  limits: DEFAULT_LIMITS,
};
const BOB = '@bob:example.org';
const CAROL = '@carol:example.org';
const GATEWAY = 'https://push.example.org/_matrix/push/v1/notify';

const setPusher = (userId: string, overrides: Partial<RawPusherSetAction> = {}): Command => ({
  op: 'set_pusher',
  userId,
  action: {
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'shared-phone-token',
    app_display_name: 'App',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: GATEWAY },
    ...overrides,
  },
});

/** A worker: the service, and the delivery pusher cache that its change events keep current. */
function aWorker(store: PushStore) {
  const service = new PushService(store, OPTIONS);
  const cache = new CachedPusherLookup(store, { maxBytes: 1 << 20, maxEntries: 1000, maxStalenessMs: 60_000 });
  return {
    service,
    cache,
    /** Serves a request and applies what it announces, as `RequestEnvelope` does. */
    handle: async (command: Command, messageId?: string): Promise<HandleOutcome> => {
      const outcome = await service.handle(command, { messageId });
      for (const change of outcome.changes ?? []) if (change.type === 'm.pushers') cache.pushersChanged(change.user_id);
      return outcome;
    },
    pushkeysOf: async (userId: string) => (await cache.listPushers(userId)).map((p) => p.pushkey),
  };
}

const announced = (outcome: HandleOutcome) =>
  (outcome.changes ?? []).filter((c) => c.type === 'm.pushers').map((c) => c.user_id);

describe('set_pusher announces every user whose pushers it touched', () => {
  it('a pushkey taken over by another user (append absent): its former owner is announced and no longer pushed to', async () => {
    const worker = aWorker(new InMemoryPushStore());
    await worker.handle(setPusher(ALICE));
    // Alice's list is cached for delivery: her notifications go to the phone.
    expect(await worker.pushkeysOf(ALICE)).toEqual(['shared-phone-token']);

    // The phone is signed in as Bob now, whose client registers the same token.
    const outcome = await worker.handle(setPusher(BOB));

    expect(outcome.reply).toEqual({ ok: true, body: {} });
    expect(announced(outcome).sort()).toEqual([ALICE, BOB].sort());
    expect(await worker.pushkeysOf(ALICE)).toEqual([]);
    expect(await worker.pushkeysOf(BOB)).toEqual(['shared-phone-token']);
  });

  it('every former owner gets an event with a pushers version of their own', async () => {
    const store = new InMemoryPushStore();
    const worker = aWorker(store);
    await worker.handle(setPusher(ALICE));
    await worker.handle(setPusher(CAROL, { append: true }));
    const outcome = await worker.handle(setPusher(BOB, { append: false }));
    expect([...(outcome.changes ?? [])].sort((a, b) => a.user_id.localeCompare(b.user_id))).toEqual([
      { user_id: ALICE, type: 'm.pushers', version: 2 },
      { user_id: BOB, type: 'm.pushers', version: 1 },
      { user_id: CAROL, type: 'm.pushers', version: 2 },
    ]);
  });

  it('append: true leaves the other owners alone and announces only the writer', async () => {
    const worker = aWorker(new InMemoryPushStore());
    await worker.handle(setPusher(ALICE));
    const outcome = await worker.handle(setPusher(BOB, { append: true }));
    expect(announced(outcome)).toEqual([BOB]);
    expect(await worker.pushkeysOf(ALICE)).toEqual(['shared-phone-token']);
  });

  it('a repeat of what the writer has still announces a former owner it removed the pushkey from', async () => {
    const store = new InMemoryPushStore();
    const worker = aWorker(store);
    await worker.handle(setPusher(BOB, { append: true }));
    await worker.handle(setPusher(ALICE, { append: true }));
    expect(await worker.pushkeysOf(ALICE)).toEqual(['shared-phone-token']);
    // Bob's pusher is unchanged; Alice loses hers.
    const outcome = await worker.handle(setPusher(BOB));
    expect(announced(outcome)).toEqual([ALICE]);
    expect(outcome.unchanged).toBe(true);
    expect(await worker.pushkeysOf(ALICE)).toEqual([]);
  });
});

/**
 * A pusher write and its version bump with its record are two updates: the
 * first can land and the second fail (a timeout, a primary stepping down),
 * which is answered Unavailable with no event. The caller retries with the
 * same messageId; the write finds no record and is judged again on what is
 * stored, where it changes nothing now, yet it must announce its user.
 */
describe('a pusher write retried after its record failed announces its user even though nothing changes now', () => {
  /** A store whose first `bumpPushersVersion` fails after the pusher write itself landed. */
  function bumpFailsOnce(inner: InMemoryPushStore): PushStore {
    let failures = 1;
    return wrapStore(inner, {
      bumpPushersVersion: async (userId, record) => {
        if (failures > 0) {
          failures -= 1;
          throw new StoreUnavailableError('the primary stepped down');
        }
        return inner.bumpPushersVersion(userId, record);
      },
    });
  }

  it.each<[string, Command, readonly string[]]>([
    ['set_pusher of a new phone', setPusher(ALICE, { pushkey: 'new-phone' }), ['old-phone', 'new-phone']],
    ['set_pusher kind: null', setPusher(ALICE, { kind: null, pushkey: 'old-phone' }), []],
    ['delete_pushers', { op: 'delete_pushers', userId: ALICE, devices: { all: true }, includeEmail: false }, []],
  ])('%s', async (_case, command, pushkeysAfter) => {
    const inner = new InMemoryPushStore();
    await inner.upsertPusher({
      user_id: ALICE,
      kind: 'http',
      app_id: 'org.example.app',
      pushkey: 'old-phone',
      app_display_name: 'App',
      device_display_name: 'Phone',
      lang: 'en',
      data: { url: GATEWAY },
      enabled: true,
    });
    const worker = aWorker(bumpFailsOnce(inner));
    expect(await worker.pushkeysOf(ALICE)).toEqual(['old-phone']);

    const first = await worker.handle(command, 'm-1');
    expect(first.reply).toMatchObject({ ok: false, error: { kind: 'Unavailable' } });
    expect(first.changes).toBeUndefined();

    const retry = await worker.handle(command, 'm-1');
    expect(retry.reply.ok).toBe(true);
    expect(announced(retry)).toEqual([ALICE]);
    expect((await inner.listPushers(ALICE)).map((p) => p.pushkey).sort()).toEqual([...pushkeysAfter].sort());
    expect((await worker.pushkeysOf(ALICE)).sort()).toEqual([...pushkeysAfter].sort());

    // Its record now says it changed the pushers: a further redelivery announces them again.
    expect(announced(await worker.handle(command, 'm-1'))).toEqual([ALICE]);
  });

  it('without a messageId a write that changes nothing still announces nothing', async () => {
    const worker = aWorker(new InMemoryPushStore());
    await worker.handle(setPusher(ALICE));
    const outcome = await worker.handle(setPusher(ALICE));
    expect(outcome).toEqual({ reply: { ok: true, body: {} }, conflicts: 0, unchanged: true });
  });
});
