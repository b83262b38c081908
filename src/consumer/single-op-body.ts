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
  if (body.byteLength > limits.maxRequestBytes) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.requestTooLarge(limits.maxRequestBytes)));
  }
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (nestsDeeperThan(text, limits.maxJsonDepth))
    return fail(matrixError('BadJson', LIMIT_MESSAGES.jsonTooDeep(limits.maxJsonDepth)));
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
