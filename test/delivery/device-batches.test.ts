import { describe, expect, it } from 'vitest';
import { batchDevices, type DeliveryPusher } from '../../src/delivery/device-batches.js';
import { ALICE } from '../support/builders.js';
import { aDeliveryPusher, GATEWAY_URL, OTHER_GATEWAY_URL } from '../support/notify-builders.js';

const BOB = '@bob:example.org';

/** Alice's HTTP pusher `n` (pushkey `key-n`), with overrides. */
const device = (n: number, overrides: Partial<DeliveryPusher> = {}): DeliveryPusher =>
  aDeliveryPusher({ pushkey: `key-${n}`, ...overrides });

const at = (url: string, format?: string): DeliveryPusher['data'] => (format === undefined ? { url } : { url, format });

/** Each batch as `url format: pushkeys`, and the e-mail pushers' pushkeys: the whole plan at a glance. */
function summary(pushers: readonly DeliveryPusher[]): { batches: string[]; email: string[] } {
  const { batches, emailPushers } = batchDevices(pushers);
  return {
    batches: batches.map(
      (b) => `${b.userId} ${b.url} ${b.format ?? '(full)'}: ${b.pushers.map((p) => p.pushkey).join(',')}`,
    ),
    email: emailPushers.map((p) => p.pushkey),
  };
}

const G = GATEWAY_URL;
const O = OTHER_GATEWAY_URL;

describe('batching one recipient’s devices', () => {
  it.each<[string, DeliveryPusher[], string[]]>([
    ['no pushers: no request', [], []],
    ['one device: one request', [device(1)], [`${ALICE} ${G} (full): key-1`]],
    [
      'three devices on one URL: one request',
      [device(1), device(2), device(3)],
      [`${ALICE} ${G} (full): key-1,key-2,key-3`],
    ],
    [
      'three devices on one URL and format, under different apps: one request',
      [
        device(1, { app_id: 'a', data: at(G, 'event_id_only') }),
        device(2, { app_id: 'b', data: at(G, 'event_id_only') }),
        device(3, { app_id: 'c', data: at(G, 'event_id_only') }),
      ],
      [`${ALICE} ${G} event_id_only: key-1,key-2,key-3`],
    ],
    [
      'one URL, two formats: two requests',
      [device(1, { data: at(G, 'event_id_only') }), device(2), device(3, { data: at(G, 'event_id_only') })],
      [`${ALICE} ${G} event_id_only: key-1,key-3`, `${ALICE} ${G} (full): key-2`],
    ],
    [
      'two URLs: two requests, in the order of their first device',
      [device(1, { data: at(O) }), device(2), device(3, { data: at(O) })],
      [`${ALICE} ${O} (full): key-1,key-3`, `${ALICE} ${G} (full): key-2`],
    ],
    [
      'URLs that differ only in a trailing slash are different gateways (the URL is used exactly)',
      [device(1), device(2, { data: at(`${G}/`) })],
      [`${ALICE} ${G} (full): key-1`, `${ALICE} ${G}/ (full): key-2`],
    ],
    [
      'other keys of data do not split a batch',
      [device(1, { data: { url: G, default_payload: { aps: {} } } }), device(2, { data: { url: G, brand: 'x' } })],
      [`${ALICE} ${G} (full): key-1,key-2`],
    ],
    [
      'a format of "null" is not the absent format',
      [device(1, { data: at(G, 'null') }), device(2)],
      [`${ALICE} ${G} null: key-1`, `${ALICE} ${G} (full): key-2`],
    ],
    [
      'disabled pushers are left out',
      [device(1, { enabled: false }), device(2), device(3, { enabled: false })],
      [`${ALICE} ${G} (full): key-2`],
    ],
    ['an HTTP pusher without a URL is left out', [device(1, { data: {} }), device(2)], [`${ALICE} ${G} (full): key-2`]],
    ['an HTTP pusher with an empty URL is left out', [device(1, { data: at('') })], []],
    [
      'e-mail pushers are not delivered',
      [device(1, { kind: 'email', data: {} }), device(2), device(3, { kind: 'email', data: at(G) })],
      [`${ALICE} ${G} (full): key-2`],
    ],
    [
      'the same pushkey under two apps goes in two requests (a rejection names one pusher)',
      [device(1, { app_id: 'a' }), device(1, { app_id: 'b' }), device(2, { app_id: 'a' })],
      [`${ALICE} ${G} (full): key-1,key-2`, `${ALICE} ${G} (full): key-1`],
    ],
    [
      'devices of different users never share a request',
      [device(1), device(2, { user_id: BOB }), device(3)],
      [`${ALICE} ${G} (full): key-1,key-3`, `${BOB} ${G} (full): key-2`],
    ],
  ])('%s', (_name, pushers, batches) => {
    expect(summary(pushers).batches).toEqual(batches);
  });
});

describe('e-mail pushers, handed back to be counted', () => {
  it.each<[string, DeliveryPusher[], string[]]>([
    ['none among HTTP pushers', [device(1), device(2)], []],
    [
      'every enabled one, in order',
      [device(1, { kind: 'email', data: {} }), device(2), device(3, { kind: 'email', data: {} })],
      ['key-1', 'key-3'],
    ],
    ['not a disabled one', [device(1, { kind: 'email', data: {}, enabled: false })], []],
  ])('%s', (_name, pushers, email) => {
    expect(summary(pushers).email).toEqual(email);
  });
});

describe('a batch', () => {
  it('holds the pushers as given, and no format key for the full format', () => {
    const first = device(1, { data: { url: G, custom: 1 } });
    const second = device(2);
    const { batches } = batchDevices([first, second]);
    expect(batches).toStrictEqual([{ userId: ALICE, url: G, pushers: [first, second] }]);
    expect(batches[0]?.pushers[0]).toBe(first);
  });

  it('is the same for the same pushers (deterministic)', () => {
    const pushers = [device(1, { data: at(O) }), device(2), device(3, { data: at(G, 'event_id_only') }), device(4)];
    expect(batchDevices(pushers)).toStrictEqual(batchDevices([...pushers]));
  });
});
