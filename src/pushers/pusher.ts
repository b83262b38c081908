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

/** A pusher as `get_pushers` returns it (Matrix wire field names). */
export interface Pusher {
  readonly pushkey: string;
  readonly kind: PusherKind;
  readonly app_id: string;
  readonly app_display_name: string;
  readonly device_display_name: string;
  readonly profile_tag?: string;
  readonly lang: string;
  readonly data: PusherData;
}

/** A pusher with its owner, as a store keeps it. */
export interface StoredPusher extends Pusher {
  readonly user_id: string;
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
    JSON.stringify(a.data) === JSON.stringify(b.data)
  );
}

/** The wire form of a stored pusher, without its owner. */
export function toWirePusher({ user_id: _owner, ...pusher }: StoredPusher): Pusher {
  return pusher;
}

/**
 * The body of Matrix `POST /pushers/set`: `kind: null` deletes the pusher
 * with this `app_id` and `pushkey`; otherwise every field but `profile_tag`
 * and `append` is required (the worker names the missing ones).
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
}
