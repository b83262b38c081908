import { Ajv } from 'ajv';
import type { NotifyRequestBody } from '../contract/ops.js';
import { NotifyRequestSchema } from '../contract/request-schemas.js';
import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import { isJsonObject } from '../matrix/json.js';
import { nestsDeeperThan } from '../matrix/json-depth.js';
import { isValidUserId } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';
import { describeSchemaError } from './schema-error.js';

export interface NotifyLimits {
  /** The message body, in bytes (TooLarge). */
  readonly maxRequestBytes: number;
  /** Arrays and objects nested deeper than this are BadJson, checked before parsing. */
  readonly maxJsonDepth: number;
  readonly maxRecipients: number;
}

// Compiled once per process, like the other request schemas.
const validate = new Ajv({ strict: true, allErrors: false, coerceTypes: false, useDefaults: false }).compile(
  NotifyRequestSchema,
);

/**
 * Turns the body of a message on the delivery queue into a `notify`
 * request, or the contract's error for it: TooLarge over the size or
 * recipient limits, BadJson naming the first offending field (the schema,
 * then each recipient's user ID and repeats in list order), Unrecognized
 * for another op. Nothing is sent for a message refused here.
 */
export function parseNotifyRequest(body: Uint8Array, limits: NotifyLimits): Result<NotifyRequestBody> {
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
  if (json['op'] !== 'notify') {
    return fail(
      matrixError('Unrecognized', `Only notify is served on this queue, not ${JSON.stringify(json['op'] ?? null)}.`),
    );
  }
  if (!validate(json)) return fail(matrixError('BadJson', describeSchemaError(validate.errors?.[0])));
  const request = json as NotifyRequestBody;
  if (request.recipients.length > limits.maxRecipients) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyNotifyRecipients(limits.maxRecipients)));
  }
  const seen = new Set<string>();
  for (const [index, recipient] of request.recipients.entries()) {
    if (!isValidUserId(recipient.user_id))
      return fail(matrixError('BadJson', `recipients.${index}.user_id is not a valid Matrix user ID.`));
    if (seen.has(recipient.user_id))
      return fail(matrixError('BadJson', `recipients.${index}.user_id repeats ${recipient.user_id}.`));
    seen.add(recipient.user_id);
  }
  return ok(request);
}
