import type { StoredPusher } from '../pushers/pusher.js';
import { bodyFor, type RequestBody } from './request-body.js';

/** A pending request as far as the check needs it. */
export interface PlannedRequest {
  readonly url: string;
  readonly body: RequestBody;
  readonly devices: readonly { readonly appId: string; readonly pushkey: string }[];
}

export type RecheckVerdict =
  /** Every device it names still has its pusher: send it as planned. */
  | { readonly kind: 'unchanged' }
  /** Some pushers are gone: send it to the others only. */
  | {
      readonly kind: 'narrowed';
      readonly body: RequestBody;
      readonly devices: readonly { readonly appId: string; readonly pushkey: string }[];
    }
  /** No pusher it names is left: send nothing. */
  | { readonly kind: 'none' };

/**
 * A request planned before its user's pushers changed, checked against the
 * pushers now: a device goes on getting it only while a pusher with its app
 * ID and pushkey still exists, is enabled, is an HTTP pusher and still
 * points at the URL the request goes to. A logout, `delete_pushers` or
 * `set_pusher` with `kind: null` between the `notify` and the attempt thus
 * sends that device nothing (Synapse #3696, #8925: pushes to logged-out
 * devices).
 */
export function recheckDevices(
  request: PlannedRequest,
  pushers: readonly Pick<StoredPusher, 'kind' | 'app_id' | 'pushkey' | 'enabled' | 'data'>[],
): RecheckVerdict {
  const live = new Set(
    pushers
      .filter((pusher) => pusher.kind === 'http' && pusher.enabled && pusher.data.url === request.url)
      .map((pusher) => identity(pusher.app_id, pusher.pushkey)),
  );
  const kept = request.devices.filter((device) => live.has(identity(device.appId, device.pushkey)));
  if (kept.length === request.devices.length) return { kind: 'unchanged' };
  if (kept.length === 0) return { kind: 'none' };
  const keptIds = new Set(kept.map((device) => identity(device.appId, device.pushkey)));
  const body = bodyFor(request.body, (device) => keptIds.has(identity(device.appId, device.pushkey)));
  return { kind: 'narrowed', body, devices: kept };
}

function identity(appId: string, pushkey: string): string {
  return JSON.stringify([appId, pushkey]);
}
