import { createHash } from 'node:crypto';

/**
 * A short, stable tag for a pushkey, fit for logs and for following one
 * device through them: the first 8 hex characters of its SHA-256.
 *
 * A pushkey is a device token (an FCM registration token, an APNs device
 * token): whoever holds it can push to that phone through the app's
 * gateway, so it never goes into a log line or a metric label in full.
 * Tokens are long random strings, so 32 bits of an unsalted hash reveal
 * nothing usable about one and cannot be turned back into it, while the
 * same pushkey always gets the same tag. Two devices may share a tag (about
 * one pair in 65,000 devices): next to the user and app_id of the log line
 * that is still enough to tell them apart. Never a metric label either way:
 * one value per device is unbounded cardinality.
 */
export function pushkeyTag(pushkey: string): string {
  return createHash('sha256').update(pushkey, 'utf8').digest('hex').slice(0, 8);
}
