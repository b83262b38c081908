/** A notify body as the push gateway double (push-gateway-double.ts) reads it: parsed, held to the spec's shape, its devices. */

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

type JsonObject = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The devices of a body `notifyBodyProblem` accepted. */
export function devicesOf(body: unknown): readonly { readonly pushkey: string }[] {
  return (body as { notification: { devices: { pushkey: string }[] } }).notification.devices;
}

/** The notification fields the spec types as strings. */
const STRING_FIELDS = ['event_id', 'room_id', 'type', 'sender', 'sender_display_name', 'room_name', 'room_alias'];

/**
 * What is wrong with a notify body by the spec's shape, or `undefined`:
 * `notification` an object whose `devices` is a non-empty list of
 * `{app_id, pushkey, pushkey_ts?, data?, tweaks?}` (data without its url), and each optional field
 * of the notification of its type when present (null is not a value of any
 * of them). Other fields are allowed: the spec's objects are open.
 */
export function notifyBodyProblem(body: unknown): string | undefined {
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
      if (field in counts && !isCount(counts[field]))
        return `notification.counts.${field} is not a non-negative integer`;
    }
  }
  const devices = notification['devices'];
  if (!Array.isArray(devices)) return 'notification.devices is missing or not a list';
  if (devices.length === 0) return 'notification.devices is empty';
  for (const [index, device] of (devices as unknown[]).entries()) {
    const at = `notification.devices[${index}]`;
    if (!isObject(device)) return `${at} is not an object`;
    for (const field of ['app_id', 'pushkey']) {
      const value = device[field];
      if (typeof value !== 'string' || value === '') return `${at}.${field} is missing or not a non-empty string`;
    }
    if ('pushkey_ts' in device && !isCount(device['pushkey_ts']))
      return `${at}.pushkey_ts is not a non-negative integer`;
    for (const field of ['data', 'tweaks']) {
      if (field in device && !isObject(device[field])) return `${at}.${field} is not an object`;
    }
    // The spec's device data is the pusher's data "minus the url key".
    if (isObject(device['data']) && 'url' in device['data']) return `${at}.data has a url: it must be left out`;
  }
  return undefined;
}

function isCount(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
