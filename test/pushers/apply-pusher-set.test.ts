import { describe, expect, it } from 'vitest';
import { applyPusherSet } from '../../src/pushers/apply-pusher-set.js';
import type { PusherSetPlan } from '../../src/pushers/decide-pusher-set.js';
import { toWirePusher, type StoredPusher } from '../../src/pushers/pusher.js';
import { ALICE } from '../support/builders.js';

const BOB = '@bob:example.org';

function aPusher(overrides: Partial<StoredPusher> = {}): StoredPusher {
  return {
    user_id: ALICE,
    kind: 'http',
    app_id: 'org.example.app',
    pushkey: 'key-1',
    app_display_name: 'Example',
    device_display_name: 'Phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
    ...overrides,
  };
}

function upsert(pusher: StoredPusher, removeFromOtherUsers = true): PusherSetPlan {
  const { user_id: userId, ...wire } = pusher;
  return { type: 'upsert', key: { userId, appId: pusher.app_id, pushkey: pusher.pushkey }, pusher: wire, removeFromOtherUsers };
}

describe('applying a pusher set', () => {
  it('creates a pusher that does not exist', () => {
    const outcome = applyPusherSet([], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [aPusher()], effect: 'created', removedFromOtherUsers: 0 });
  });

  it('updates the pusher with the same user, app_id and pushkey', () => {
    const updated = aPusher({ lang: 'de', data: { url: 'https://other.example.org/_matrix/push/v1/notify', x: 1 } });
    const outcome = applyPusherSet([aPusher()], upsert(updated));
    expect(outcome).toEqual({ pushers: [updated], effect: 'updated', removedFromOtherUsers: 0 });
  });

  it('leaves a pusher that already has exactly these values as it is', () => {
    const stored = aPusher({ profile_tag: 'p' });
    const outcome = applyPusherSet([stored], upsert(structuredClone(stored)));
    expect(outcome).toEqual({ pushers: [stored], effect: 'unchanged', removedFromOtherUsers: 0 });
    expect(outcome.pushers[0]).toBe(stored);
  });

  it("still removes other users' pushers when its own is unchanged (append: false)", () => {
    const bobs = aPusher({ user_id: BOB });
    const outcome = applyPusherSet([aPusher(), bobs], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [aPusher()], effect: 'unchanged', removedFromOtherUsers: 1 });
  });

  it('treats another app_id or pushkey as another pusher', () => {
    const other = aPusher({ app_id: 'org.example.other' });
    const outcome = applyPusherSet([other], upsert(aPusher()));
    expect(outcome.pushers).toEqual([other, aPusher()]);
    expect(outcome.effect).toBe('created');
  });

  it("append: false removes other users' pushers with the same app_id and pushkey", () => {
    const bobs = aPusher({ user_id: BOB });
    const bobsOther = aPusher({ user_id: BOB, pushkey: 'key-2' });
    const outcome = applyPusherSet([bobs, bobsOther], upsert(aPusher()));
    expect(outcome).toEqual({ pushers: [bobsOther, aPusher()], effect: 'created', removedFromOtherUsers: 1 });
  });

  it("append: true keeps other users' pushers", () => {
    const bobs = aPusher({ user_id: BOB });
    const outcome = applyPusherSet([bobs], upsert(aPusher(), false));
    expect(outcome.pushers).toEqual([bobs, aPusher()]);
  });

  it("deletes only the user's own pusher", () => {
    const bobs = aPusher({ user_id: BOB });
    const plan: PusherSetPlan = { type: 'delete', key: { userId: ALICE, appId: 'org.example.app', pushkey: 'key-1' } };
    expect(applyPusherSet([aPusher(), bobs], plan)).toEqual({ pushers: [bobs], effect: 'deleted', removedFromOtherUsers: 0 });
  });

  it('deleting a pusher that does not exist succeeds and changes nothing', () => {
    const plan: PusherSetPlan = { type: 'delete', key: { userId: ALICE, appId: 'nope', pushkey: 'nope' } };
    expect(applyPusherSet([aPusher()], plan)).toEqual({ pushers: [aPusher()], effect: 'unchanged', removedFromOtherUsers: 0 });
  });

  it('the wire form drops the owner and keeps everything else', () => {
    const { user_id: _owner, ...wire } = aPusher({ profile_tag: 't' });
    expect(toWirePusher(aPusher({ profile_tag: 't' }))).toEqual(wire);
  });
});
