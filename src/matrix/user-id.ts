import { isValidServerName } from './server-name.js';

/** The spec caps a full user ID at 255 bytes of UTF-8. */
export const MAX_USER_ID_BYTES = 255;

/**
 * Historical user ID localparts (any printable ASCII but `:`) are accepted,
 * not only the stricter modern grammar: accounts created under the old rules
 * still exist and still own push rules.
 */
const LOCALPART = /^[\x21-\x39\x3B-\x7E]+$/;

export function isValidUserId(userId: string): boolean {
  if (!userId.startsWith('@')) return false;
  if (Buffer.byteLength(userId, 'utf8') > MAX_USER_ID_BYTES) return false;
  const colon = userId.indexOf(':');
  if (colon < 0) return false;
  return LOCALPART.test(userId.slice(1, colon)) && isValidServerName(userId.slice(colon + 1));
}
