import { Ajv } from 'ajv';
import type { EvaluateRequestBody } from '../contract/ops.js';
import { EvaluateRequestSchema } from '../contract/request-schemas.js';
import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import { isJsonObject, type JsonObject } from '../matrix/json.js';
import { userIdValidator } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';
import { parseSingleOpBody } from './single-op-body.js';
import type { EvaluateCommand } from '../service/command.js';
import { describeSchemaError } from './schema-error.js';
import { expandRecipientsByServer, recipientsByServerCount, type RecipientsByServer } from './recipients-by-server.js';

export interface EvaluateLimits {
  /** The message body, in bytes (TooLarge). */
  readonly maxRequestBytes: number;
  /** Arrays and objects nested deeper than this (the envelope counts) are BadJson, checked before parsing. */
  readonly maxJsonDepth: number;
  /** The event's compact JSON encoding, in UTF-8 bytes (the spec's event size limit). */
  readonly maxEventBytes: number;
  readonly maxRecipients: number;
}

/**
 * Turns the body of a message on the evaluate queue into a command, or the
 * contract's error for it. Unlike the user's requests, keys such as
 * `constructor` are not refused here: an event may carry any key, refusing
 * one would silence notifications for it, and the evaluator reads only own
 * properties and never merges the event into anything.
 */
export function parseEvaluateRequest(body: Uint8Array, limits: EvaluateLimits): Result<EvaluateCommand> {
  const parsed = parseSingleOpBody(body, limits, 'evaluate');
  if (!parsed.ok) return parsed;
  const json = parsed.value;
  return toEvaluateCommand(json, limits);
}

// Compiled once per process, like the other request schemas.
const validate = new Ajv({ strict: true, allErrors: false, coerceTypes: false, useDefaults: false }).compile(
  EvaluateRequestSchema,
);

/**
 * Checks a parsed `evaluate` body: BadJson naming the first offending field
 * (schema, then each recipient's user ID and duplicates in list order),
 * TooLarge for an event or a recipient list over the limits.
 */
export function toEvaluateCommand(json: JsonObject, limits: EvaluateLimits): Result<EvaluateCommand> {
  if (!validate(json)) return fail(matrixError('BadJson', describeSchemaError(validate.errors?.[0])));
  const request = json as EvaluateRequestBody & JsonObject;
  const { recipients_by_server: byServer } = request;
  if (byServer !== undefined || request.recipients === undefined) return toGroupedCommand(request, byServer, limits);
  if (request.recipients.length > limits.maxRecipients) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyRecipients(limits.maxRecipients)));
  }
  const eventRefused = checkEvent(request, limits);
  if (eventRefused !== undefined) return eventRefused;
  const seen = new Set<string>();
  const isValidUserId = userIdValidator();
  const { recipients } = request;
  for (let index = 0; index < recipients.length; index += 1) {
    const userId = (recipients[index] as { user_id: string }).user_id;
    if (!isValidUserId(userId))
      return fail(matrixError('BadJson', `recipients.${index}.user_id is not a valid Matrix user ID.`));
    if (seen.has(userId)) return fail(matrixError('BadJson', `recipients.${index}.user_id repeats ${userId}.`));
    seen.add(userId);
  }
  // The schema checked every field the evaluator relies on.
  return ok({ op: 'evaluate', request: { ...request, recipients } });
}

/** The event's own checks, after the schema's: an object, within `maxEventBytes`. */
function checkEvent(request: JsonObject, limits: EvaluateLimits): Result<never> | undefined {
  const event = request['event'];
  if (!isJsonObject(event)) return fail(matrixError('BadJson', 'event must be object.'));
  if (Buffer.byteLength(JSON.stringify(event), 'utf8') > limits.maxEventBytes) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.eventTooLarge(limits.maxEventBytes)));
  }
  return undefined;
}

/**
 * A request with `recipients_by_server` (recipients-by-server.ts), checked
 * in the plain form's order: which form, the count, the event, then the
 * recipients, expanded into the list the plain form would carry.
 */
function toGroupedCommand(
  request: EvaluateRequestBody & JsonObject,
  byServer: RecipientsByServer | undefined,
  limits: EvaluateLimits,
): Result<EvaluateCommand> {
  // The schema's own words for a missing list, as before the grouped form existed.
  if (byServer === undefined) return fail(matrixError('BadJson', "request must have required property 'recipients'."));
  if (request.recipients !== undefined)
    return fail(matrixError('BadJson', 'evaluate takes only one of recipients and recipients_by_server.'));
  if (recipientsByServerCount(byServer) > limits.maxRecipients) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyRecipients(limits.maxRecipients)));
  }
  const eventRefused = checkEvent(request, limits);
  if (eventRefused !== undefined) return eventRefused;
  const recipients = expandRecipientsByServer(byServer);
  if (!recipients.ok) return recipients;
  return ok({ op: 'evaluate', request: { ...request, recipients: recipients.value } });
}
