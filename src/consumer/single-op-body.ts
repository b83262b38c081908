import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import { isJsonObject, type JsonObject } from '../matrix/json.js';
import { nestsDeeperThan } from '../matrix/json-depth.js';
import { fail, ok, type Result } from '../result/result.js';

export interface BodyLimits {
  /** The message body, in bytes (TooLarge). */
  readonly maxRequestBytes: number;
  /** Arrays and objects nested deeper than this (the envelope counts) are BadJson, checked before parsing. */
  readonly maxJsonDepth: number;
}

/**
 * The first checks of a message on a queue that serves one op (evaluate,
 * notify): its size, its depth before it is parsed, JSON, an object, and
 * that op. What the op's fields must be is the caller's.
 */
export function parseSingleOpBody(body: Uint8Array, limits: BodyLimits, op: string): Result<JsonObject> {
  const text = singleOpText(body, limits);
  if (!text.ok) return text;
  if (nestsDeeperThan(text.value, limits.maxJsonDepth))
    return fail(matrixError('BadJson', LIMIT_MESSAGES.jsonTooDeep(limits.maxJsonDepth)));
  return parseSingleOpJson(text.value, op);
}

/** The body as text, if it is within `maxRequestBytes` (TooLarge). */
export function singleOpText(body: Uint8Array, limits: Pick<BodyLimits, 'maxRequestBytes'>): Result<string> {
  if (body.byteLength > limits.maxRequestBytes) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.requestTooLarge(limits.maxRequestBytes)));
  }
  return ok(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
}

/**
 * Text whose depth the caller checked: JSON, an object, and `op`. `JSON.parse`
 * does not recurse, so a deep value costs it memory, not stack.
 */
export function parseSingleOpJson(text: string, op: string): Result<JsonObject> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail(matrixError('BadJson', 'Request body is not valid JSON.'));
  }
  if (!isJsonObject(json)) return fail(matrixError('BadJson', 'Request body must be a JSON object.'));
  if (json['op'] !== op) {
    return fail(
      matrixError('Unrecognized', `Only ${op} is served on this queue, not ${JSON.stringify(json['op'] ?? null)}.`),
    );
  }
  return ok(json);
}
