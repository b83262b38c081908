import type { NotifyRequestBody } from '../contract/ops.js';
import { isJsonObject, type JsonValue } from '../matrix/json.js';

/** The event part of a `notify` message, as the schema checked it. */
export type NotifyNotification = NotifyRequestBody['notification'];
/** One recipient of a `notify` message, as the schema checked it. */
export type NotifyRecipient = NotifyRequestBody['recipients'][number];

/** How urgently the gateway should wake the device (the push gateway API's `prio`). */
export type PushPrio = 'high' | 'low';

/** The `tweaks` every device of a recipient gets: tweak name → value, in the order first set. */
export type Tweaks = Readonly<Record<string, JsonValue>>;

/** What one recipient of one notification is sent: nothing, or a push with these tweaks and this prio. */
export type RecipientPlan = NotPushed | Pushed;

export interface NotPushed {
  readonly pushed: false;
}

export interface Pushed {
  readonly pushed: true;
  /** No `event_id`: only the badge changes (after a read receipt, say). */
  readonly countsOnly: boolean;
  readonly prio: PushPrio;
  readonly tweaks: Tweaks;
}

// A recipient listed without actions was meant to be pushed: the homeserver
// lists only those it notifies, and evaluate's plain "notify" carries no tweaks.
const DEFAULT_ACTIONS: readonly unknown[] = ['notify'];

// Only an encrypted event, a sound or a highlight may ring, so only they wake a
// phone; anything else can wait for the device's next sync.
const WAKING_EVENT_TYPE = 'm.room.encrypted';

/**
 * Decides whether a recipient is pushed for a notification, and with what.
 *
 * A notification without `event_id` is a badge update: it goes to every
 * device whatever the actions say, low priority and without tweaks, so that a
 * read receipt never makes a phone ring or light up (a `sound` tweak left over
 * from the event's actions would).
 */
export function planRecipient(notification: NotifyNotification, recipient: NotifyRecipient): RecipientPlan {
  if (notification.event_id === undefined) return { pushed: true, countsOnly: true, prio: 'low', tweaks: {} };
  const actions = recipient.actions ?? DEFAULT_ACTIONS;
  if (!actions.includes('notify')) return { pushed: false };
  const tweaks = tweaksOf(actions);
  return { pushed: true, countsOnly: false, prio: notification.prio ?? inferredPrio(notification, tweaks), tweaks };
}

/**
 * Every `set_tweak` action becomes one entry; a later action for the same
 * tweak replaces an earlier one. A highlight without a value means true (the
 * spec says so); any other tweak without a value has nothing to carry and is
 * left out rather than sent with an invented one.
 */
function tweaksOf(actions: readonly unknown[]): Tweaks {
  const entries = new Map<string, JsonValue>();
  for (const action of actions) {
    if (!isJsonObject(action)) continue;
    const name = action['set_tweak'];
    if (typeof name !== 'string') continue;
    const value = Object.hasOwn(action, 'value') ? action['value'] : name === 'highlight' ? true : undefined;
    if (value !== undefined) entries.set(name, value);
  }
  // fromEntries defines own properties: a tweak named "__proto__" stays data, not a prototype.
  return Object.fromEntries(entries);
}

function inferredPrio(notification: NotifyNotification, tweaks: Tweaks): PushPrio {
  const wakes =
    notification.type === WAKING_EVENT_TYPE || Object.hasOwn(tweaks, 'sound') || tweaks['highlight'] === true;
  return wakes ? 'high' : 'low';
}
