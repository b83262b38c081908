import { isValidServerName } from './server-name.js';

/** The spec caps a full user ID at 255 bytes of UTF-8. */
export const MAX_USER_ID_BYTES = 255;

/**
 * Historical user ID localparts (any printable ASCII but `:`) are accepted,
 * not only the stricter modern grammar: accounts created under the old rules
 * still exist and still own push rules.
 */
export const LOCALPART = /^[\x21-\x39\x3B-\x7E]+$/;

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
 * and the last one is recognised without cutting it out of the ID; the
 * localpart is checked in place; the byte count is skipped where the length
 * alone settles it (a UTF-16 unit is at most 3 bytes of UTF-8). The same
 * answers, a fraction of the cost: no string is made per ID.
 */
export function userIdValidator(): (userId: string) => boolean {
  const servers = new Map<string, boolean>();
  let lastServer: string | undefined;
  return (userId) => {
    if (userId.charCodeAt(0) !== 0x40 /* @ */) return false;
    if (userId.length * 3 > MAX_USER_ID_BYTES && Buffer.byteLength(userId, 'utf8') > MAX_USER_ID_BYTES) return false;
    const colon = userId.indexOf(':');
    if (colon < 0) return false;
    if (!isLocalpartAt(userId, colon)) return false;
    if (lastServer !== undefined && userId.length - colon - 1 === lastServer.length && userId.endsWith(lastServer))
      return true;
    const server = userId.slice(colon + 1);
    let validServer = servers.get(server);
    if (validServer === undefined) {
      validServer = isValidServerName(server);
      servers.set(server, validServer);
    }
    if (validServer) lastServer = server;
    return validServer;
  };
}

/** `LOCALPART` on `userId` between the `@` and `colon`, without the slice. */
function isLocalpartAt(userId: string, colon: number): boolean {
  return isLocalpartBetween(userId, 1, colon);
}

/**
 * Whether `@<localpart>:<server>` is a valid user ID made of exactly these
 * parts, `server` being a valid server name (`isValidServerName`, checked
 * once by the caller for many localparts): the localpart by the grammar
 * (so without `:`), the whole within 255 bytes (all of it ASCII by then).
 */
export function isValidLocalpartOf(localpart: string, server: string): boolean {
  return (
    localpart.length + server.length + 2 <= MAX_USER_ID_BYTES && isLocalpartBetween(localpart, 0, localpart.length)
  );
}

/** `LOCALPART` on `text` from `start` to `end` (not empty). */
function isLocalpartBetween(text: string, start: number, end: number): boolean {
  if (end <= start) return false;
  for (let index = start; index < end; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit < 0x21 || unit > 0x7e || unit === 0x3a) return false;
  }
  return true;
}
