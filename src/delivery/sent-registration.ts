import type { RejectedRegistration } from '../pushers/rejected-registration.js';
import { bodyText, PlannedBody, type RequestBody } from './request-body.js';

/** A pending request as far as its rejection needs it. */
interface SentRequest {
  readonly userId: string;
  readonly url: string;
  readonly body: RequestBody;
  /** When the `notify` was accepted (ms). */
  readonly acceptedAt: number;
}

/** One device the request named. */
interface SentDevice {
  readonly appId: string;
  readonly pushkey: string;
}

/**
 * The registration a request was sent to `device` for, as a gateway's
 * rejection of it names it: the request's URL, and the pusher's `ts` when
 * the request was planned, which its body holds as the device's
 * `pushkey_ts` in seconds (so up to the end of that second). Both come from
 * the store, so no two clocks are compared. A body without it (never
 * written so) falls back to when the `notify` was accepted: whatever the
 * request was planned with was set before that.
 */
export function sentRegistration(request: SentRequest, device: SentDevice): RejectedRegistration {
  const seconds = pushkeyTsOf(request.body, device);
  return {
    userId: request.userId,
    appId: device.appId,
    pushkey: device.pushkey,
    url: request.url,
    setAtMost: seconds === undefined ? request.acceptedAt : seconds * 1000 + 999,
  };
}

function pushkeyTsOf(requestBody: RequestBody, device: SentDevice): number | undefined {
  if (requestBody instanceof PlannedBody) {
    // The pushers it was planned with: what the text would say (gateway-payload.ts), without encoding it.
    const pusher = requestBody.pushers.find((p) => p.app_id === device.appId && p.pushkey === device.pushkey);
    return pusher === undefined ? undefined : Math.floor(pusher.pushkeyTsMs / 1000);
  }
  let body: unknown;
  try {
    body = JSON.parse(bodyText(requestBody)) as unknown;
  } catch {
    return undefined;
  }
  const devices = (body as { notification?: { devices?: unknown } } | null)?.notification?.devices;
  if (!Array.isArray(devices)) return undefined;
  for (const sent of devices as readonly { app_id?: unknown; pushkey?: unknown; pushkey_ts?: unknown }[]) {
    if (sent.app_id !== device.appId || sent.pushkey !== device.pushkey) continue;
    return typeof sent.pushkey_ts === 'number' && Number.isFinite(sent.pushkey_ts) ? sent.pushkey_ts : undefined;
  }
  return undefined;
}
