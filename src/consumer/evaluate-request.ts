import { Ajv } from 'ajv';
import type { EvaluateRequestBody } from '../contract/ops.js';
import { EvaluateEventSchema, EvaluateRequestSchema } from '../contract/request-schemas.js';
import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import type { EvaluateRequest } from '../evaluation/evaluate-request.js';
import { isJsonObject, type JsonObject } from '../matrix/json.js';
import { userIdValidator } from '../matrix/user-id.js';
import { fail, ok, type Result } from '../result/result.js';
import { parseSingleOpJson, singleOpText } from './single-op-body.js';
import { BATCH_DEPTH_CEILING, evaluateBodyDepth } from './evaluate-body-depth.js';
import type { EvaluateBatchCommand, EvaluateCommand } from '../service/command.js';
import { describeSchemaError } from './schema-error.js';
import { expandRecipientsByServer, recipientsByServerCount, type RecipientsByServer } from './recipients-by-server.js';

export interface EvaluateLimits {
  /** The message body, in bytes (TooLarge), whichever form it has. */
  readonly maxRequestBytes: number;
  /**
   * Arrays and objects nested deeper than this are BadJson, checked before
   * parsing: the single form's body (the envelope counts), each entry of
   * the batch form on its own (as it would be sent alone; it fails alone),
   * and the batch form's envelope outside its entries.
   */
  readonly maxJsonDepth: number;
  /** The event's compact JSON encoding, in UTF-8 bytes (the spec's event size limit). */
  readonly maxEventBytes: number;
  /** Recipients of one event. */
  readonly maxRecipients: number;
  /** Entries of the batch form's `events` (TooLarge). */
  readonly maxBatchEvents: number;
  /**
   * Recipients of all the batch form's events together, those refused on
   * their own left out (TooLarge for the whole message): one message never
   * costs more than this many evaluations, whatever its events.
   */
  readonly maxBatchRecipients: number;
}

/**
 * Turns the body of a message on the evaluate queue into a command, or the
 * contract's error for it: the single form (`event`, `room`, `recipients`)
 * or the batch form (`events`: a list of those). Unlike the user's
 * requests, keys such as `constructor` are not refused here: an event may
 * carry any key, refusing one would silence notifications for it, and the
 * evaluator reads only own properties and never merges the event into
 * anything.
 */
export function parseEvaluateRequest(
  body: Uint8Array,
  limits: EvaluateLimits,
): Result<EvaluateCommand | EvaluateBatchCommand> {
  const text = singleOpText(body, limits);
  if (!text.ok) return text;
  const tooDeep = fail(matrixError('BadJson', LIMIT_MESSAGES.jsonTooDeep(limits.maxJsonDepth)));
  // One scan: the envelope's depth and each entry's, so that a deep entry fails alone.
  const depth = evaluateBodyDepth(text.value, Math.max(BATCH_DEPTH_CEILING, limits.maxJsonDepth + 2));
  if (depth.overCeiling || depth.outside > limits.maxJsonDepth) return tooDeep;
  const parsed = parseSingleOpJson(text.value, 'evaluate');
  if (!parsed.ok) return parsed;
  const json = parsed.value;
  // The single form has no `events`: `outside` was its whole depth.
  return Object.hasOwn(json, 'events')
    ? toEvaluateBatchCommand(json, limits, depth.entries)
    : toEvaluateCommand(json, limits);
}

// Compiled once per process, like the other request schemas.
const ajv = new Ajv({ strict: true, allErrors: false, coerceTypes: false, useDefaults: false });
const validate = ajv.compile(EvaluateRequestSchema);
const validateEvent = ajv.compile(EvaluateEventSchema);

/**
 * Checks a parsed `evaluate` body: BadJson naming the first offending field
 * (schema, then each recipient's user ID and duplicates in list order),
 * TooLarge for an event or a recipient list over the limits.
 */
export function toEvaluateCommand(json: JsonObject, limits: EvaluateLimits): Result<EvaluateCommand> {
  if (!validate(json)) return fail(matrixError('BadJson', describeSchemaError(validate.errors?.[0])));
  const checked = checkEvent(json, limits);
  return checked.ok ? ok({ op: 'evaluate', request: checked.value }) : checked;
}

/**
 * Checks the batch form. The envelope (`events`: an array of 1 to
 * `maxBatchEvents` entries, with no `event`, `room` or `recipients` beside
 * it) refuses the whole message; each entry is then checked on its own and
 * gets the error the single form would have answered for it alone, its
 * depth (`entryDepths`, from `evaluateBodyDepth`) first.
 */
export function toEvaluateBatchCommand(
  json: JsonObject,
  limits: EvaluateLimits,
  entryDepths: readonly number[] = [],
): Result<EvaluateBatchCommand> {
  const { events } = json;
  if (!Array.isArray(events)) return fail(matrixError('BadJson', 'events must be array.'));
  if (events.length === 0) return fail(matrixError('BadJson', 'events must not be empty.'));
  if (events.length > limits.maxBatchEvents)
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyEvents(limits.maxBatchEvents)));
  for (const key of ['event', 'room', 'recipients', 'recipients_by_server'])
    if (Object.hasOwn(json, key)) return fail(matrixError('BadJson', `${key} is not taken beside events.`));
  const entries = events.map((entry, index) =>
    // Before the schema and anything else that walks the entry: it is refused as its single form would be.
    (entryDepths[index] ?? 0) > limits.maxJsonDepth
      ? fail(matrixError('BadJson', LIMIT_MESSAGES.jsonTooDeep(limits.maxJsonDepth)))
      : toEvaluateEvent(entry, limits),
  );
  let pairs = 0;
  for (const entry of entries) if (entry.ok) pairs += entry.value.recipients.length;
  if (pairs > limits.maxBatchRecipients)
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyBatchRecipients(limits.maxBatchRecipients)));
  return ok({ op: 'evaluate_batch', events: entries });
}

function toEvaluateEvent(entry: unknown, limits: EvaluateLimits): Result<EvaluateRequest> {
  if (!isJsonObject(entry)) return fail(matrixError('BadJson', 'Each entry of events must be a JSON object.'));
  if (!validateEvent(entry)) return fail(matrixError('BadJson', describeSchemaError(validateEvent.errors?.[0])));
  return checkEvent(entry, limits);
}

/** One event's fields as the schema checked them: the recipients in either form. */
type EventFields = Omit<EvaluateRequestBody, 'op'> & JsonObject;

/**
 * What the schema cannot say: which recipient form, the recipient count,
 * the event's size, valid and distinct user IDs. The grouped form is
 * expanded into the list the plain form would carry.
 */
function checkEvent(request: EventFields, limits: EvaluateLimits): Result<EvaluateRequest> {
  const { recipients_by_server: byServer } = request;
  if (byServer !== undefined || request.recipients === undefined) return checkGrouped(request, byServer, limits);
  if (request.recipients.length > limits.maxRecipients) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyRecipients(limits.maxRecipients)));
  }
  const eventRefused = checkEventBody(request, limits);
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
  return ok({ ...request, recipients });
}

/** The event's own checks, after the schema's: an object, within `maxEventBytes`. */
function checkEventBody(request: JsonObject, limits: EvaluateLimits): Result<never> | undefined {
  const event = request['event'];
  if (!isJsonObject(event)) return fail(matrixError('BadJson', 'event must be object.'));
  if (Buffer.byteLength(JSON.stringify(event), 'utf8') > limits.maxEventBytes) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.eventTooLarge(limits.maxEventBytes)));
  }
  return undefined;
}

/**
 * An event with `recipients_by_server` (recipients-by-server.ts), checked
 * in the plain form's order: which form, the count, the event, then the
 * recipients, expanded into the list the plain form would carry.
 */
function checkGrouped(
  request: EventFields,
  byServer: RecipientsByServer | undefined,
  limits: EvaluateLimits,
): Result<EvaluateRequest> {
  // The schema's own words for a missing list, as before the grouped form existed.
  if (byServer === undefined) return fail(matrixError('BadJson', "request must have required property 'recipients'."));
  if (request.recipients !== undefined)
    return fail(matrixError('BadJson', 'evaluate takes only one of recipients and recipients_by_server.'));
  if (recipientsByServerCount(byServer) > limits.maxRecipients) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.tooManyRecipients(limits.maxRecipients)));
  }
  const eventRefused = checkEventBody(request, limits);
  if (eventRefused !== undefined) return eventRefused;
  const recipients = expandRecipientsByServer(byServer);
  if (!recipients.ok) return recipients;
  return ok({ ...request, recipients: recipients.value });
}
