import { isValidServerName } from './server-name.js';

/** The opaque part of a room ID: printable, no whitespace, no `:`. */
const OPAQUE = /^[\x21-\x39\x3B-\x7E]+$/;

/**
 * `!opaque:server` (room versions 1–11) or `!opaque` (room version 12 and
 * later, where the room ID is derived from the create event and has no
 * server part).
 */
export function isValidRoomId(roomId: string): boolean {
  if (!roomId.startsWith('!') || Buffer.byteLength(roomId, 'utf8') > 255) return false;
  const colon = roomId.indexOf(':');
  if (colon < 0) return OPAQUE.test(roomId.slice(1));
  return OPAQUE.test(roomId.slice(1, colon)) && isValidServerName(roomId.slice(colon + 1));
}
