import { describe, expect, it } from 'vitest';
import {
  decidePusherSet,
  resolveEnabled,
  type PusherPolicy,
  type RawPusherSetAction,
} from '../../src/pushers/decide-pusher-set.js';
import { ALICE } from '../support/builders.js';
import { expectError, expectOk } from '../support/expect-result.js';

const SECURE: PusherPolicy = { allowInsecureGateways: false };

function anHttpAction(overrides: Partial<RawPusherSetAction> = {}): RawPusherSetAction {
  return {
    kind: 'http',
    app_id: 'org.example.app.ios',
    pushkey:
      'APA91bHPRgkF3JUikC4ENAHEeMrd41Zxv3hVZjC9KtT8OvPVGJ-hQMRKRrZuJAEcl7B338qju59zJMjw2DELjzEvxwYv7hH5Ynpc1ODQ0aT4U4OFEeco8ohsN5PjL1iC2dNtk2BAokeMCg2ZXKqpc8FXKmhX94kIxQ',
    app_display_name: 'Example',
    device_display_name: 'Alice’s phone',
    lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only' },
    ...overrides,
  };
}

describe('set pusher: refusals', () => {
  it('names every missing field at once', () => {
    expectError(
      decidePusherSet(ALICE, { kind: 'http' }, SECURE),
      'MissingParam',
      'Missing parameters: app_id, pushkey, app_display_name, device_display_name, lang, data',
    );
  });

  it('asks for kind when it is absent (null is not absent)', () => {
    const { kind: _kind, ...rest } = anHttpAction();
    expectError(decidePusherSet(ALICE, rest, SECURE), 'MissingParam', 'Missing parameters: kind');
  });

  it('a delete (kind null) needs only app_id and pushkey', () => {
    expectError(
      decidePusherSet(ALICE, { kind: null, app_id: 'a' }, SECURE),
      'MissingParam',
      'Missing parameters: pushkey',
    );
    expect(expectOk(decidePusherSet(ALICE, { kind: null, app_id: 'a', pushkey: 'k' }, SECURE))).toEqual({
      type: 'delete',
      key: { userId: ALICE, appId: 'a', pushkey: 'k' },
    });
  });

  it.each([
    ['pushkey over 512 bytes', { pushkey: 'é'.repeat(257) }, 'pushkey must be at most 512 bytes.'],
    ['app_id over 64 characters', { app_id: 'a'.repeat(65) }, 'app_id must be at most 64 characters.'],
    ['an unknown kind', { kind: 'carrier-pigeon' }, 'Unsupported pusher kind; expected one of: http, email.'],
    ['http without data.url', { data: {} }, 'http pushers need data.url, a string.'],
    ['http with a numeric url', { data: { url: 5 } }, 'http pushers need data.url, a string.'],
    ['http with a relative url', { data: { url: '/_matrix/push/v1/notify' } }, 'data.url must be an absolute URL.'],
    [
      'http with plain http',
      { data: { url: 'http://push.example.org/_matrix/push/v1/notify' } },
      'data.url must be an https URL.',
    ],
    [
      'http with another scheme',
      { data: { url: 'ftp://push.example.org/_matrix/push/v1/notify' } },
      'data.url must be an https URL.',
    ],
    [
      'http with the wrong path',
      { data: { url: 'https://push.example.org/notify' } },
      'data.url must have the path /_matrix/push/v1/notify.',
    ],
    [
      'a non-string format',
      { data: { url: 'https://p.example.org/_matrix/push/v1/notify', format: 1 } },
      'data.format must be a string.',
    ],
  ])('%s → InvalidParam', (_case, overrides, message) => {
    expectError(decidePusherSet(ALICE, anHttpAction(overrides), SECURE), 'InvalidParam', message);
  });

  it('limits sit exactly at 512 bytes and 64 characters', () => {
    expect(decidePusherSet(ALICE, anHttpAction({ pushkey: 'é'.repeat(256), app_id: '😀'.repeat(64) }), SECURE).ok).toBe(
      true,
    );
  });
});

describe('set pusher: accepted', () => {
  it('creates an upsert plan that removes the key from other users by default', () => {
    const action = anHttpAction({ profile_tag: 'work' });
    expect(expectOk(decidePusherSet(ALICE, action, SECURE))).toEqual({
      type: 'upsert',
      key: { userId: ALICE, appId: action.app_id, pushkey: action.pushkey },
      removeFromOtherUsers: true,
      pusher: {
        kind: 'http',
        app_id: action.app_id,
        pushkey: action.pushkey,
        app_display_name: 'Example',
        device_display_name: 'Alice’s phone',
        lang: 'en',
        profile_tag: 'work',
        data: action.data,
        enabled: true,
      },
    });
  });

  it.each([
    [true, false],
    [false, true],
  ])('append: %s → removeFromOtherUsers: %s', (append, remove) => {
    const plan = expectOk(decidePusherSet(ALICE, anHttpAction({ append }), SECURE));
    expect(plan.type === 'upsert' && plan.removeFromOtherUsers).toBe(remove);
  });

  it('keeps custom data keys exactly', () => {
    const data = {
      url: 'https://push.example.org/_matrix/push/v1/notify',
      format: 'org.example.format',
      default_payload: { aps: { 'mutable-content': 1, alert: { 'loc-key': 'SINGLE_UNREAD' } } },
      'org.example.flag': [true, null, 1],
    };
    const plan = expectOk(decidePusherSet(ALICE, anHttpAction({ data }), SECURE));
    expect(plan.type === 'upsert' && plan.pusher.data).toEqual(data);
  });

  it('allows a plain http gateway only when the policy does', () => {
    const action = anHttpAction({ data: { url: 'http://localhost:5000/_matrix/push/v1/notify' } });
    expect(decidePusherSet(ALICE, action, { allowInsecureGateways: true }).ok).toBe(true);
  });

  it('email pushers need no url', () => {
    const plan = expectOk(
      decidePusherSet(ALICE, anHttpAction({ kind: 'email', pushkey: 'alice@example.org', data: {} }), SECURE),
    );
    expect(plan.type).toBe('upsert');
  });

  it('omits profile_tag when not given', () => {
    const plan = expectOk(decidePusherSet(ALICE, anHttpAction(), SECURE));
    expect(plan.type === 'upsert' && 'profile_tag' in plan.pusher).toBe(false);
  });
});

describe('set pusher: the device and enabled (MSC3881)', () => {
  const pusherOf = (action: RawPusherSetAction, deviceId?: string) => {
    const plan = expectOk(decidePusherSet(ALICE, action, SECURE, { deviceId }));
    if (plan.type !== 'upsert') throw new Error('expected an upsert');
    return plan.pusher;
  };

  it('records the device the front names', () => {
    expect(pusherOf(anHttpAction(), 'PHONE')).toMatchObject({ device_id: 'PHONE' });
    expect(pusherOf(anHttpAction())).not.toHaveProperty('device_id');
  });

  it('records no device for an e-mail pusher: it belongs to the account (MSC3881: device_id only for http)', () => {
    expect(
      pusherOf(anHttpAction({ kind: 'email', pushkey: 'alice@example.org', data: {} }), 'PHONE'),
    ).not.toHaveProperty('device_id');
  });

  it("ignores a device_id in the client's action, under either name", () => {
    const posted = {
      ...anHttpAction(),
      device_id: 'STOLEN',
      'org.matrix.msc3881.device_id': 'STOLEN',
    } as RawPusherSetAction;
    expect(pusherOf(posted, 'PHONE').device_id).toBe('PHONE');
    expect(pusherOf(posted)).not.toHaveProperty('device_id');
    expect(pusherOf(posted)).not.toHaveProperty('org.matrix.msc3881.device_id');
  });

  it.each<[string, Partial<RawPusherSetAction>, boolean]>([
    ['neither name', {}, true],
    ['enabled: false', { enabled: false }, false],
    ['the unstable name false', { 'org.matrix.msc3881.enabled': false }, false],
    ['both false', { enabled: false, 'org.matrix.msc3881.enabled': false }, false],
    ['null under both names (not given)', { enabled: null, 'org.matrix.msc3881.enabled': null }, true],
    ['null and false', { enabled: null, 'org.matrix.msc3881.enabled': false }, false],
    [
      'conflicting names, no stored pusher: the unstable one',
      { enabled: true, 'org.matrix.msc3881.enabled': false },
      false,
    ],
  ])('a new pusher with %s is enabled: %s', (_case, overrides, enabled) => {
    expect(pusherOf(anHttpAction(overrides)).enabled).toBe(enabled);
  });

  it.each<[boolean, Partial<RawPusherSetAction>, boolean]>([
    // Element: a copy of the listed pusher (both names true) with the unstable one set.
    [true, { enabled: true, 'org.matrix.msc3881.enabled': false }, false],
    [false, { enabled: false, 'org.matrix.msc3881.enabled': true }, true],
    // A client that sets the stable name over such a copy.
    [true, { enabled: false, 'org.matrix.msc3881.enabled': true }, false],
    [false, { enabled: true, 'org.matrix.msc3881.enabled': false }, true],
    // Agreeing names, or one, decide alone; nothing given is true.
    [false, { enabled: true, 'org.matrix.msc3881.enabled': true }, true],
    [true, { enabled: false }, false],
    [false, {}, true],
  ])('stored enabled: %s, set %j → %s (the name that changes it wins)', (stored, overrides, enabled) => {
    expect(resolveEnabled(anHttpAction(overrides), stored)).toBe(enabled);
  });
});
