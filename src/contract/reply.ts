import type { MatrixError, MatrixErrorBody } from '../errors/error-catalogue.js';

/** The contract's reply envelope. */
export type Reply =
  { readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly error: MatrixErrorBody };

export function success(body: unknown): Reply {
  return { ok: true, body };
}

/** Bodies whose JSON text is already known, by object (see `successEncoded`). */
const encodedBodies = new WeakMap<object, string>();

/**
 * A success whose body's JSON text is already at hand: `json` must be
 * exactly `JSON.stringify(body)`. `encodeReply` then sends it as it is
 * instead of encoding the body again (a whole ruleset for `get_pushrules`,
 * whose text is kept with the ruleset while it is unchanged).
 */
export function successEncoded(body: object, json: string): Reply {
  encodedBodies.set(body, json);
  return { ok: true, body };
}

/** Whole replies already encoded as bytes, by reply object (see `successBytes`). */
const encodedReplies = new WeakMap<object, Uint8Array>();

/**
 * A success whose whole envelope is already encoded (`{"ok":true,"body":…}`
 * as UTF-8): an evaluation thread's reply, handed over without a copy and
 * published as it is. `body` is left empty: nothing on the worker's side
 * reads a success body but the encoding.
 */
export function successBytes(bytes: Uint8Array): Reply {
  const reply: Reply = { ok: true, body: {} };
  encodedReplies.set(reply, bytes);
  return reply;
}

/**
 * A success sent many times as it is (a read answered from memory): its
 * body, and its whole envelope encoded once, as `successEncoded(body, json)`
 * would encode it on every send.
 */
export function successKept(body: object, json: string): Reply {
  const reply: Reply = { ok: true, body };
  encodedBodies.set(body, json);
  // A copy of its own, of exactly its size: a small `Buffer.from` is a
  // slice of a shared 8 KiB pool slab, which a kept reply would pin whole.
  const text = `{"ok":true,"body":${json}}`;
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  encodedReplies.set(reply, bytes);
  return reply;
}

/** What is published: the bytes of `successBytes`, or `encodeReply` as UTF-8. */
export function encodeReplyBytes(value: Reply | object): Buffer {
  const bytes = encodedReplies.get(value);
  return bytes === undefined
    ? Buffer.from(encodeReply(value))
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** `JSON.stringify(value)`, with a body given to `successEncoded` taken as it was encoded. */
export function encodeReply(value: Reply | object): string {
  const bytes = encodedReplies.get(value);
  if (bytes !== undefined) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  const body = (value as { ok?: unknown; body?: unknown }).ok === true ? (value as { body?: unknown }).body : undefined;
  const json = typeof body === 'object' && body !== null ? encodedBodies.get(body) : undefined;
  return json === undefined ? JSON.stringify(value) : `{"ok":true,"body":${json}}`;
}

export function failure(error: MatrixError): Reply {
  return { ok: false, error: error.toBody() };
}
