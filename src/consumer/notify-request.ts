import { Ajv } from 'ajv';
import type { NotifyRequestBody } from '../contract/ops.js';
import { NotifyRequestSchema } from '../contract/request-schemas.js';
import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import { isValidUserId } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';
import { parseSingleOpBody } from './single-op-body.js';
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
  const parsed = parseSingleOpBody(body, limits, 'notify');
  if (!parsed.ok) return parsed;
  const json = parsed.value;
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
