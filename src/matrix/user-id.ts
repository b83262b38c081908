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

/**
 * `isValidUserId` for many IDs at once (an `evaluate` request's thousands
 * of recipients): the few server names among them are checked once each,
 * and the byte count is skipped where the length alone settles it (a UTF-16
 * unit is at most 3 bytes of UTF-8). The same answers, a fraction of the cost.
 */
export function userIdValidator(): (userId: string) => boolean {
  const servers = new Map<string, boolean>();
  return (userId) => {
    if (userId.charCodeAt(0) !== 0x40 /* @ */) return false;
    if (userId.length * 3 > MAX_USER_ID_BYTES && Buffer.byteLength(userId, 'utf8') > MAX_USER_ID_BYTES) return false;
    const colon = userId.indexOf(':');
    if (colon < 0) return false;
    const server = userId.slice(colon + 1);
    let validServer = servers.get(server);
    if (validServer === undefined) {
      validServer = isValidServerName(server);
      servers.set(server, validServer);
    }
    return validServer && LOCALPART.test(userId.slice(1, colon));
  };
}
