import type { JsonObject } from '../matrix/json.js';

/** Pusher kinds this server can deliver to. */
export const PUSHER_KINDS = ['http', 'email'] as const;
export type PusherKind = (typeof PUSHER_KINDS)[number];

/**
 * `data` is kept exactly as the client sent it: push gateways read custom
 * keys from it (e.g. `default_payload`), so any key round-trips.
 */
export interface PusherData extends JsonObject {
  readonly url?: string;
  readonly format?: string;
}

/** MSC3881's unstable names of `enabled` and `device_id`, in requests and in `get_pushers`. */
export const UNSTABLE_ENABLED = 'org.matrix.msc3881.enabled';
/** @public Exported because `WirePusher`, which the client publishes, is keyed by it. */
export const UNSTABLE_DEVICE_ID = 'org.matrix.msc3881.device_id';

/** A pusher's values (Matrix wire field names), as a store keeps them without the owner. */
export interface Pusher {
  readonly pushkey: string;
  readonly kind: PusherKind;
  readonly app_id: string;
  readonly app_display_name: string;
  readonly device_display_name: string;
  readonly profile_tag?: string;
  readonly lang: string;
  readonly data: PusherData;
  /** MSC3881: a disabled pusher is kept but sent nothing. Stored pushers without it read as enabled. */
  readonly enabled: boolean;
  /**
   * The device whose access token created the pusher (MSC3881), set by the
   * front, never by the client's body; absent when unknown (a pusher stored
   * before devices were recorded, or a request without a device).
   */
  readonly device_id?: string;
}

/**
 * A pusher as `get_pushers` returns it: `enabled` and `device_id` under
 * their stable names and under MSC3881's unstable ones (clients of today
 * read the unstable ones); both `device_id` names are left out when the
 * device is unknown, and for pushers other than `http` (MSC3881: only an
 * HTTP pusher belongs to a device; e-mail pushers are the account's).
 */
export interface WirePusher extends Pusher {
  readonly [UNSTABLE_ENABLED]: boolean;
  readonly [UNSTABLE_DEVICE_ID]?: string;
}

/** A pusher with its owner, as a store keeps it. */
export interface StoredPusher extends Pusher {
  readonly user_id: string;
  /**
   * When the pusher was created or last changed (ms), set by the store:
   * a gateway request's `pushkey_ts`. Absent on pushers stored before it
   * was recorded. Not one of the pusher's values: `samePusher` ignores it
   * and `get_pushers` never shows it.
   */
  readonly ts?: number;
}

/** A pusher's identity: the spec keys pushers by user, app ID and pushkey. */
export interface PusherKey {
  readonly userId: string;
  readonly appId: string;
  readonly pushkey: string;
}

export function pusherMatches(pusher: StoredPusher, key: PusherKey): boolean {
  return pusher.user_id === key.userId && pusher.app_id === key.appId && pusher.pushkey === key.pushkey;
}

/**
 * Whether two pushers hold the same values: every field, `profile_tag`
 * absent on both or equal, and `data` with the same JSON text. `data` is
 * opaque to this server and kept exactly as the client sent it, key order
 * included (push gateways get it back as it was), so the text is what is
 * compared — as the MongoDB store compares the `data_json` it keeps.
 */
export function samePusher(a: StoredPusher, b: StoredPusher): boolean {
  return (
    a.user_id === b.user_id &&
    a.app_id === b.app_id &&
    a.pushkey === b.pushkey &&
    a.kind === b.kind &&
    a.app_display_name === b.app_display_name &&
    a.device_display_name === b.device_display_name &&
    a.lang === b.lang &&
    a.profile_tag === b.profile_tag &&
    a.enabled === b.enabled &&
    a.device_id === b.device_id &&
    JSON.stringify(a.data) === JSON.stringify(b.data)
  );
}

/**
 * The wire form of a stored pusher, with MSC3881's unstable names beside
 * the stable ones. Fields are picked one by one, not spread: what a store
 * keeps beside the pusher's values (its owner, `ts`) never reaches a client.
 */
export function toWirePusher(pusher: StoredPusher): WirePusher {
  const deviceId = pusher.kind === 'http' ? pusher.device_id : undefined;
  return {
    pushkey: pusher.pushkey,
    kind: pusher.kind,
    app_id: pusher.app_id,
    app_display_name: pusher.app_display_name,
    device_display_name: pusher.device_display_name,
    ...(pusher.profile_tag === undefined ? {} : { profile_tag: pusher.profile_tag }),
    lang: pusher.lang,
    data: pusher.data,
    enabled: pusher.enabled,
    ...(deviceId === undefined ? {} : { device_id: deviceId }),
    [UNSTABLE_ENABLED]: pusher.enabled,
    ...(deviceId === undefined ? {} : { [UNSTABLE_DEVICE_ID]: deviceId }),
  };
}

/**
 * The body of Matrix `POST /pushers/set`: `kind: null` deletes the pusher
 * with this `app_id` and `pushkey`; otherwise every field but `profile_tag`,
 * `append` and `enabled` is required (the worker names the missing ones).
 *
 * A pusher object from `get_pushers` may be sent back as it is (clients do,
 * to toggle `enabled`): its `device_id` keys are ignored — the device is
 * the front's to say, from the access token.
 */
export interface PusherSetAction {
  readonly pushkey: string;
  readonly kind: PusherKind | null;
  readonly app_id: string;
  readonly app_display_name?: string;
  readonly device_display_name?: string;
  readonly profile_tag?: string;
  readonly lang?: string;
  readonly data?: PusherData;
  readonly append?: boolean;
  /** MSC3881; true when neither name is given. */
  readonly enabled?: boolean;
  readonly [UNSTABLE_ENABLED]?: boolean;
  /** Ignored by the worker. */
  readonly device_id?: string;
  /** Ignored by the worker. */
  readonly [UNSTABLE_DEVICE_ID]?: string;
}
