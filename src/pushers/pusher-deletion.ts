import type { StoredPusher } from './pusher.js';

/**
 * Which of a user's pushers a homeserver's account event removes, by the
 * device that created them:
 * - `deviceIds`: those of these devices (logout, device deletion);
 * - `exceptDeviceId`: all but those of this device (password change that
 *   logs out the other devices). Pushers of an unknown device go too: they
 *   may be the very devices being logged out;
 * - `all`: every one (log out everywhere, deactivation).
 */
export type DeviceSelector =
  { readonly deviceIds: readonly string[] } | { readonly exceptDeviceId: string } | { readonly all: true };

export interface PusherDeletion {
  readonly userId: string;
  readonly devices: DeviceSelector;
  /**
   * E-mail pushers (`kind: "email"`) belong to the account, not to a
   * device: they are kept unless this is set (deactivation). They record no
   * device, so `deviceIds` never selects them; `exceptDeviceId` and `all`
   * do when this is set.
   */
  readonly includeEmail: boolean;
}

/**
 * Whether `deletion` removes `pusher`. The in-memory store filters with
 * this; the MongoDB store builds the same filter as a query, so that each
 * pusher is judged and deleted in one atomic step.
 */
export function deletionSelects(deletion: PusherDeletion, pusher: StoredPusher): boolean {
  if (pusher.user_id !== deletion.userId) return false;
  if (pusher.kind === 'email' && !deletion.includeEmail) return false;
  const { devices } = deletion;
  if ('all' in devices) return true;
  if ('exceptDeviceId' in devices) return pusher.device_id !== devices.exceptDeviceId;
  return pusher.device_id !== undefined && devices.deviceIds.includes(pusher.device_id);
}
