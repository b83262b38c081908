import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import type { JsonValue } from '../matrix/json.js';
import { fail, ok, type Result } from '../result/result.js';
import type { Command } from './command.js';

/**
 * Per-request limits. They keep one request from costing a worker (or the
 * stored document) an unbounded amount; the Matrix spec states none, so
 * the defaults in `config/default.json` are generous for real clients.
 */
export interface RequestLimits {
  /** Bodies larger than this are refused (TooLarge) before they are parsed. */
  readonly maxRequestBytes: number;
  /** Any string in the request, object keys included, in UTF-8 bytes (InvalidParam). */
  readonly maxStringBytes: number;
  readonly maxActionsPerRule: number;
  readonly maxConditionsPerRule: number;
}

/** Checks a parsed request against the limits: InvalidParam naming the first offence. */
export function checkRequestLimits(raw: JsonValue, command: Command, limits: RequestLimits): Result<Command> {
  const long = findLongString(raw, '', limits.maxStringBytes);
  if (long !== undefined) return fail(matrixError('InvalidParam', LIMIT_MESSAGES.stringTooLong(long, limits.maxStringBytes)));
  const actions =
    command.op === 'set_pushrule' ? command.request.body.actions : command.op === 'set_pushrule_actions' ? command.actions : [];
  if (actions.length > limits.maxActionsPerRule) {
    return fail(matrixError('InvalidParam', LIMIT_MESSAGES.tooManyActions(limits.maxActionsPerRule)));
  }
  const conditions = command.op === 'set_pushrule' ? (command.request.body.conditions ?? []) : [];
  if (conditions.length > limits.maxConditionsPerRule) {
    return fail(matrixError('InvalidParam', LIMIT_MESSAGES.tooManyConditions(limits.maxConditionsPerRule)));
  }
  return ok(command);
}

/** The path of the first string (or key) over `max` UTF-8 bytes, e.g. `rule.conditions.0.pattern`. */
function findLongString(value: JsonValue, path: string, max: number): string | undefined {
  if (typeof value === 'string') return tooLong(value, max) ? path : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    // `isArray` forgets the element type of a readonly array.
    for (const [index, item] of (value as readonly JsonValue[]).entries()) {
      const found = findLongString(item, join(path, String(index)), max);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    if (tooLong(key, max)) return `A key in ${path === '' ? 'the request' : path}`;
    const found = findLongString(item, join(path, key), max);
    if (found !== undefined) return found;
  }
  return undefined;
}

function tooLong(text: string, max: number): boolean {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most strings need no count.
  return text.length * 3 > max && Buffer.byteLength(text, 'utf8') > max;
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}
