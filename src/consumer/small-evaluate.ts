/** How small an `evaluate` body must be to be evaluated on the event loop (`evaluate.inline*`); either 0: none is. */
export interface InlineBounds {
  /** The body's bytes: bounds the parse, whatever the recipients. */
  readonly maxBytes: number;
  /** `"user_id"` keys in the body: bounds the evaluation. */
  readonly maxRecipients: number;
}

const USER_ID_KEY = Buffer.from('"user_id"');
const BY_SERVER_KEY = Buffer.from('"recipients_by_server"');
const QUOTE = 0x22;
const ESCAPE = Buffer.from('\\u');

/**
 * Whether a raw `evaluate` body is small enough that handing it to a thread
 * would cost more than evaluating it (bench/evaluate-handoff.ts), decided
 * before any parse: its length, then its `"user_id"` keys counted with a
 * byte search that stops past `maxRecipients`, within at most `maxBytes`.
 *
 * A count, not a parse, so it may be off one way, which is safe: a
 * `"user_id"` key inside the event counts too (the request goes to a
 * thread). A key spelled with escapes (`"user\u005fid"`) would be missed,
 * so a body holding any `\u` escape goes to a thread, whatever it escapes:
 * clients and homeservers escape only what JSON requires (control
 * characters, lone surrogates), which is rare. The grouped form
 * (`recipients_by_server`) is bounded by the strings after its key. Never
 * wrong about answers: both
 * paths parse and evaluate the same way.
 */
export function isSmallEvaluate(body: Uint8Array, bounds: InlineBounds): boolean {
  if (bounds.maxBytes <= 0 || bounds.maxRecipients <= 0 || body.byteLength > bounds.maxBytes) return false;
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (bytes.includes(ESCAPE)) return false;
  let recipients = 0;
  for (let at = bytes.indexOf(USER_ID_KEY); at !== -1; at = bytes.indexOf(USER_ID_KEY, at + USER_ID_KEY.length)) {
    recipients += 1;
    if (recipients > bounds.maxRecipients) return false;
  }
  // The grouped form names no `user_id`: every string after its key counts
  // as a recipient (each localpart is one; server names, display names and
  // any key after it count too, which only sends more to a thread).
  const byServer = bytes.indexOf(BY_SERVER_KEY);
  if (byServer === -1) return true;
  let quotes = 0;
  for (let at = bytes.indexOf(QUOTE, byServer + BY_SERVER_KEY.length); at !== -1; at = bytes.indexOf(QUOTE, at + 1)) {
    quotes += 1;
    if (recipients + quotes / 2 > bounds.maxRecipients) return false;
  }
  return true;
}
