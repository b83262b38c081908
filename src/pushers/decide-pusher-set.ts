import { matrixError, type MatrixError } from '../errors/error-catalogue.js';
import { isJsonObject, type JsonObject } from '../matrix/json.js';
import { fail, ok, type Result } from '../result/result.js';
import {
  PUSHER_KINDS,
  UNSTABLE_ENABLED,
  type Pusher,
  type PusherData,
  type PusherKey,
  type PusherKind,
} from './pusher.js';

export const MAX_PUSHKEY_BYTES = 512;
export const MAX_APP_ID_CHARS = 64;
export const PUSH_GATEWAY_PATH = '/_matrix/push/v1/notify';

/** The `POST /pushers/set` body as the request schema admits it. */
export interface RawPusherSetAction {
  readonly pushkey?: string | undefined;
  readonly kind?: string | null | undefined;
  readonly app_id?: string | undefined;
  readonly app_display_name?: string | undefined;
  readonly device_display_name?: string | undefined;
  readonly profile_tag?: string | undefined;
  readonly lang?: string | undefined;
  readonly data?: JsonObject | undefined;
  readonly append?: boolean | undefined;
  /** MSC3881; `null` (which matrix-js-sdk's types allow) reads as not given. */
  readonly enabled?: boolean | null | undefined;
  readonly [UNSTABLE_ENABLED]?: boolean | null | undefined;
}

/** What the worker knows of a set action beyond its body. */
export interface PusherSetContext {
  /**
   * The device of the access token, from the front (the request envelope's
   * `device_id`); never from the client's body.
   */
  readonly deviceId?: string | undefined;
}

export interface PusherPolicy {
  /** Accept `http://` push gateway URLs (development only). */
  readonly allowInsecureGateways: boolean;
}

export type PusherSetPlan =
  | { readonly type: 'delete'; readonly key: PusherKey }
  | {
      readonly type: 'upsert';
      readonly key: PusherKey;
      /**
       * The values to store. `device_id` is the device to record if the
       * pusher is new (or has none yet); a store keeps the `device_id` of
       * a pusher that has one.
       */
      readonly pusher: Pusher;
      /** `append: false`: the same app ID and pushkey under other users go. */
      readonly removeFromOtherUsers: boolean;
    };

/** Fields required of every set action, in the order a missing list names them. */
const ALWAYS_REQUIRED = ['app_id', 'pushkey', 'kind'] as const;
/** Further fields required unless the action deletes (`kind: null`). */
const REQUIRED_TO_CREATE = ['app_display_name', 'device_display_name', 'lang', 'data'] as const;

/**
 * Decides what a `set_pusher` request does for `userId`, or why it is
 * refused. Check order: missing fields (all named at once), then value
 * limits, then the kind, then an HTTP pusher's gateway URL.
 */
export function decidePusherSet(
  userId: string,
  action: RawPusherSetAction,
  policy: PusherPolicy,
  context: PusherSetContext = {},
): Result<PusherSetPlan> {
  const required = action.kind === null ? ALWAYS_REQUIRED : [...ALWAYS_REQUIRED, ...REQUIRED_TO_CREATE];
  const missing = required.filter((field) => action[field] === undefined);
  if (missing.length > 0) return fail(matrixError('MissingParam', `Missing parameters: ${missing.join(', ')}`));

  // Present by the check above; the narrowing is lost through the array.
  const { app_id: appId = '', pushkey = '', kind } = action;
  const key: PusherKey = { userId, appId, pushkey };
  if (kind === null) return ok({ type: 'delete', key });

  const limitError = checkLimits(appId, pushkey);
  if (limitError !== undefined) return fail(limitError);
  if (!isPusherKind(kind)) {
    return fail(matrixError('InvalidParam', `Unsupported pusher kind; expected one of: ${PUSHER_KINDS.join(', ')}.`));
  }
  const data: PusherData = action.data ?? {};
  const dataError = checkData(kind, data, policy);
  if (dataError !== undefined) return fail(dataError);

  const pusher: Pusher = {
    pushkey,
    kind,
    app_id: appId,
    app_display_name: action.app_display_name ?? '',
    device_display_name: action.device_display_name ?? '',
    lang: action.lang ?? '',
    data,
    ...(action.profile_tag === undefined ? {} : { profile_tag: action.profile_tag }),
    // As for a new pusher; the service resolves it against a stored one.
    enabled: resolveEnabled(action, undefined),
    // Only an HTTP pusher belongs to a device (MSC3881); an e-mail pusher is the account's.
    ...(context.deviceId === undefined || kind !== 'http' ? {} : { device_id: context.deviceId }),
  };
  return ok({ type: 'upsert', key, pusher, removeFromOtherUsers: action.append !== true });
}

/**
 * `enabled` of a set action, under its stable name or MSC3881's unstable
 * one; true when neither is given (MSC3881's default, also on an update).
 *
 * When both are given with different values, the one that changes the
 * stored pusher wins. That is how a client that posts back a pusher from
 * `get_pushers` (which carries both names) with one of them changed is
 * understood, whichever name it changed: Element sets the unstable name
 * over a copy that still holds the old stable value. Without a stored
 * pusher there is nothing to compare with, and the unstable name, which
 * today's clients set, wins.
 */
export function resolveEnabled(action: RawPusherSetAction, stored: boolean | undefined): boolean {
  const stable = action.enabled ?? undefined;
  const unstable = action[UNSTABLE_ENABLED] ?? undefined;
  if (stable === undefined || unstable === undefined || stable === unstable) return stable ?? unstable ?? true;
  return stored === undefined ? unstable : !stored;
}

function isPusherKind(kind: string | undefined): kind is PusherKind {
  return kind !== undefined && (PUSHER_KINDS as readonly string[]).includes(kind);
}

function checkLimits(appId: string, pushkey: string): MatrixError | undefined {
  if (Buffer.byteLength(pushkey, 'utf8') > MAX_PUSHKEY_BYTES) {
    return matrixError('InvalidParam', `pushkey must be at most ${MAX_PUSHKEY_BYTES} bytes.`);
  }
  if (codePointCount(appId) > MAX_APP_ID_CHARS) {
    return matrixError('InvalidParam', `app_id must be at most ${MAX_APP_ID_CHARS} characters.`);
  }
  return undefined;
}

/** The spec counts characters (code points), not UTF-16 units. */
function codePointCount(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by its low surrogate is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) i += 1;
    count += 1;
  }
  return count;
}

function checkData(kind: PusherKind, data: JsonObject, policy: PusherPolicy): MatrixError | undefined {
  if (!isJsonObject(data)) return matrixError('InvalidParam', 'data must be an object.');
  const format = data['format'];
  if (format !== undefined && typeof format !== 'string') {
    return matrixError('InvalidParam', 'data.format must be a string.');
  }
  if (kind !== 'http') return undefined;
  const url = data['url'];
  if (typeof url !== 'string') return matrixError('InvalidParam', 'http pushers need data.url, a string.');
  return checkGatewayUrl(url, policy);
}

function checkGatewayUrl(url: string, policy: PusherPolicy): MatrixError | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return matrixError('InvalidParam', 'data.url must be an absolute URL.');
  }
  const secure = parsed.protocol === 'https:';
  const allowedInsecure = parsed.protocol === 'http:' && policy.allowInsecureGateways;
  if (!secure && !allowedInsecure) return matrixError('InvalidParam', 'data.url must be an https URL.');
  if (parsed.pathname !== PUSH_GATEWAY_PATH) {
    return matrixError('InvalidParam', `data.url must have the path ${PUSH_GATEWAY_PATH}.`);
  }
  return undefined;
}
