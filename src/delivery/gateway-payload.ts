import type { JsonObject } from '../matrix/json.js';
import type { DeviceBatch, DeliveryPusher } from './device-batches.js';
import type { NotifyNotification, NotifyRecipient, Pushed, PushPrio, Tweaks } from './notification-plan.js';

/** The format that asks the gateway to fetch the event itself: only its IDs are sent. */
const EVENT_ID_ONLY = 'event_id_only';

/** The recipient's unread counts, as the homeserver gave them. */
export interface GatewayCounts {
  readonly unread?: number;
  readonly missed_calls?: number;
}

/** One device of a push gateway request (spec: `Device`). */
export interface GatewayDevice {
  readonly app_id: string;
  readonly pushkey: string;
  /** Seconds, as the spec has it. */
  readonly pushkey_ts: number;
  readonly data: JsonObject;
  readonly tweaks: Tweaks;
}

/** The `notification` of a push gateway request (spec: `Notification`). Absent fields are left out, never null. */
export interface GatewayNotification {
  readonly event_id?: string;
  readonly room_id?: string;
  readonly type?: string;
  readonly sender?: string;
  readonly sender_display_name?: string;
  readonly room_name?: string;
  readonly room_alias?: string;
  readonly user_is_target?: boolean;
  readonly prio: PushPrio;
  readonly content?: Readonly<Record<string, unknown>>;
  readonly counts?: GatewayCounts;
  readonly devices: readonly GatewayDevice[];
}

/** The body of POST `/_matrix/push/v1/notify` (https://spec.matrix.org/v1.19/push-gateway-api/). */
export interface GatewayRequestBody {
  readonly notification: GatewayNotification;
}

/**
 * The request body for one batch of one recipient's devices, from the
 * notification, the recipient's counts and the plan for that recipient.
 *
 * Only the fields the push gateway API defines are sent on; unknown fields of
 * the `notify` message are ignored, like unknown fields of every request.
 * Counts go as given: a zero is how a badge is cleared, so it is never
 * dropped (the spec suggests omitting zeros, which leaves badges stuck).
 */
export function gatewayRequestBody(
  notification: NotifyNotification,
  recipient: Pick<NotifyRecipient, 'counts' | 'user_is_target'>,
  plan: Pick<Pushed, 'prio' | 'tweaks'>,
  batch: Pick<DeviceBatch, 'format' | 'pushers'>,
): GatewayRequestBody {
  const devices = batch.pushers.map((pusher) => gatewayDevice(pusher, plan.tweaks));
  const counts = recipient.counts === undefined ? {} : { counts: gatewayCounts(recipient.counts) };
  if (batch.format === EVENT_ID_ONLY) {
    // The gateway (or the app) fetches the event: nothing of its content leaves the server.
    return {
      notification: {
        ...present('event_id', notification.event_id),
        ...present('room_id', notification.room_id),
        ...counts,
        prio: plan.prio,
        devices,
      },
    };
  }
  return {
    notification: {
      ...eventFields(notification),
      ...present('user_is_target', recipient.user_is_target),
      prio: plan.prio,
      ...present('content', notification.content),
      ...counts,
      devices,
    },
  };
}

/** One request's body as the JSON text it is sent as. */
export type GatewayBodyEncoder = (
  recipient: Pick<NotifyRecipient, 'counts' | 'user_is_target'>,
  plan: Pick<Pushed, 'prio' | 'tweaks'>,
  batch: { readonly format?: string | undefined; readonly pushers: readonly DeliveryPusher[] },
) => string;

/**
 * `JSON.stringify(gatewayRequestBody(notification, …))`, byte for byte, for
 * every request of one notification: the fields every recipient shares
 * (the content may be most of a body) are encoded once, and each request
 * adds only its recipient's fields and its devices.
 */
export function gatewayBodyEncoder(notification: NotifyNotification): GatewayBodyEncoder {
  const ids = members({ ...present('event_id', notification.event_id), ...present('room_id', notification.room_id) });
  const head = members(eventFields(notification));
  const content = members(present('content', notification.content));
  return (recipient, plan, batch) => {
    const devices = `"devices":${JSON.stringify(batch.pushers.map((pusher) => gatewayDevice(pusher, plan.tweaks)))}`;
    const counts = recipient.counts === undefined ? '' : `"counts":${JSON.stringify(gatewayCounts(recipient.counts))}`;
    const prio = `"prio":${JSON.stringify(plan.prio)}`;
    const target =
      recipient.user_is_target === undefined ? '' : `"user_is_target":${JSON.stringify(recipient.user_is_target)}`;
    // In `gatewayRequestBody`'s order of keys.
    const parts =
      batch.format === EVENT_ID_ONLY ? [ids, counts, prio, devices] : [head, target, prio, content, counts, devices];
    return `{"notification":{${parts.filter((part) => part !== '').join(',')}}}`;
  };
}

/** The event's own fields of a full-format body, in the order they are sent. */
function eventFields(notification: NotifyNotification): Partial<NotifyNotification> {
  return {
    ...present('event_id', notification.event_id),
    ...present('room_id', notification.room_id),
    ...present('type', notification.type),
    ...present('sender', notification.sender),
    ...present('sender_display_name', notification.sender_display_name),
    ...present('room_name', notification.room_name),
    ...present('room_alias', notification.room_alias),
  };
}

/** An object's members as JSON text, without the braces: '' for an empty object. */
function members(value: object): string {
  return JSON.stringify(value).slice(1, -1);
}

function gatewayDevice(pusher: DeliveryPusher, tweaks: Tweaks): GatewayDevice {
  // The URL is where the request goes, not something the gateway needs back;
  // every other key (custom ones included) is the app's and goes as stored.
  const { url: _url, ...data } = pusher.data;
  return {
    app_id: pusher.app_id,
    pushkey: pusher.pushkey,
    pushkey_ts: Math.floor(pusher.pushkeyTsMs / 1000),
    data,
    tweaks,
  };
}

function gatewayCounts(counts: NonNullable<NotifyRecipient['counts']>): GatewayCounts {
  return { ...present('unread', counts.unread), ...present('missed_calls', counts.missed_calls) };
}

/** `{key: value}` when the value is given, `{}` when not: spread into an object, absent stays absent. */
function present<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return value === undefined ? {} : ({ [key]: value } as { [P in K]: V });
}
