/**
 * The request body of the Matrix push gateway API's one endpoint,
 * `POST /_matrix/push/v1/notify` (spec v1.19, push-gateway-api), read the
 * way a real gateway reads it: a JSON object whose `notification` is an
 * object with a `devices` array; each device has a string `app_id` and
 * `pushkey`; every other field is optional and, when present, of the type
 * the spec gives it. Unknown fields are allowed (the spec's objects are
 * open). Sygnal, the reference gateway, answers 400 for a body that is not
 * JSON, a notification that is not an object, and an empty `devices` list;
 * so does this one.
 */

export interface GatewayDevice {
  readonly app_id: string;
  readonly pushkey: string;
  readonly pushkey_ts?: number;
  readonly data?: Readonly<Record<string, unknown>>;
  readonly tweaks?: Readonly<Record<string, unknown>>;
}

export interface GatewayNotification {
  readonly event_id?: string;
  readonly room_id?: string;
  readonly type?: string;
  readonly sender?: string;
  readonly sender_display_name?: string;
  readonly room_name?: string;
  readonly room_alias?: string;
  readonly user_is_target?: boolean;
  readonly prio?: 'high' | 'low';
  readonly content?: Readonly<Record<string, unknown>>;
  readonly counts?: { readonly unread?: number; readonly missed_calls?: number };
  readonly devices: readonly GatewayDevice[];
}

/** The notification, or the 400 answer's Matrix error. */
export type NotifyBodyCheck =
  | { readonly ok: true; readonly notification: GatewayNotification }
  | { readonly ok: false; readonly errcode: 'M_NOT_JSON' | 'M_BAD_JSON'; readonly error: string };

type JsonObject = Readonly<Record<string, unknown>>;

/** The notification fields the spec types as strings. */
const STRING_FIELDS = ['event_id', 'room_id', 'type', 'sender', 'sender_display_name', 'room_name', 'room_alias'];

/** Reads a request body's text (UTF-8) as the spec's notify request. */
export function checkNotifyBody(text: string): NotifyBodyCheck {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, errcode: 'M_NOT_JSON', error: 'The body is not JSON' };
  }
  const problem = notifyBodyProblem(body);
  if (problem !== undefined) return { ok: false, errcode: 'M_BAD_JSON', error: problem };
  return { ok: true, notification: (body as { notification: GatewayNotification }).notification };
}

function notifyBodyProblem(body: unknown): string | undefined {
  if (!isObject(body)) return 'The body is not a JSON object';
  const notification = body['notification'];
  if (!isObject(notification)) return 'notification is missing or not an object';
  for (const field of STRING_FIELDS) {
    if (field in notification && typeof notification[field] !== 'string')
      return `notification.${field} is not a string`;
  }
  if ('user_is_target' in notification && typeof notification['user_is_target'] !== 'boolean') {
    return 'notification.user_is_target is not a boolean';
  }
  if ('prio' in notification && notification['prio'] !== 'high' && notification['prio'] !== 'low') {
    return 'notification.prio is neither "high" nor "low"';
  }
  if ('content' in notification && !isObject(notification['content'])) return 'notification.content is not an object';
  if ('counts' in notification) {
    const counts = notification['counts'];
    if (!isObject(counts)) return 'notification.counts is not an object';
    for (const field of ['unread', 'missed_calls']) {
      if (field in counts && !Number.isSafeInteger(counts[field]))
        return `notification.counts.${field} is not an integer`;
    }
  }
  const devices = notification['devices'];
  if (!Array.isArray(devices)) return 'notification.devices is missing or not an array';
  if (devices.length === 0) return 'No devices in notification';
  for (const [index, device] of (devices as unknown[]).entries()) {
    const at = `notification.devices[${index}]`;
    if (!isObject(device)) return `${at} is not an object`;
    for (const field of ['app_id', 'pushkey']) {
      if (typeof device[field] !== 'string') return `${at}.${field} is missing or not a string`;
    }
    if ('pushkey_ts' in device && !Number.isSafeInteger(device['pushkey_ts'])) {
      return `${at}.pushkey_ts is not an integer`;
    }
    for (const field of ['data', 'tweaks']) {
      if (field in device && !isObject(device[field])) return `${at}.${field} is not an object`;
    }
  }
  return undefined;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
