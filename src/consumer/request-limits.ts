import { LIMIT_MESSAGES, matrixError } from '../errors/error-catalogue.js';
import type { JsonValue } from '../matrix/json.js';
import { findInJson } from '../matrix/walk-json.js';
import { fail, ok, type Result } from '../result/result.js';
import type { Command } from '../service/command.js';

/**
 * Per-request limits. They keep one request from costing a worker (or the
 * stored document) an unbounded amount; the Matrix spec states none, so
 * the defaults in `config/default.json` are generous for real clients.
 */
export interface RequestLimits {
  /** Bodies larger than this are refused (TooLarge) before they are parsed. */
  readonly maxRequestBytes: number;
  /** Arrays and objects nested deeper than this are refused (BadJson) before they are parsed. */
  readonly maxJsonDepth: number;
  /** Any string in the request, object keys included, in UTF-8 bytes (InvalidParam). */
  readonly maxStringBytes: number;
  readonly maxActionsPerRule: number;
  readonly maxConditionsPerRule: number;
}

/** Checks a parsed request against the limits: InvalidParam naming the first offence. */
export function checkRequestLimits(raw: JsonValue, command: Command, limits: RequestLimits): Result<Command> {
  const long = findLongString(raw, limits.maxStringBytes);
  if (long !== undefined)
    return fail(matrixError('InvalidParam', LIMIT_MESSAGES.stringTooLong(long, limits.maxStringBytes)));
  const actions =
    command.op === 'set_pushrule'
      ? command.request.body.actions
      : command.op === 'set_pushrule_actions'
        ? command.actions
        : [];
  if (actions.length > limits.maxActionsPerRule) {
    return fail(matrixError('InvalidParam', LIMIT_MESSAGES.tooManyActions(limits.maxActionsPerRule)));
  }
  const conditions = command.op === 'set_pushrule' ? (command.request.body.conditions ?? []) : [];
  if (conditions.length > limits.maxConditionsPerRule) {
    return fail(matrixError('InvalidParam', LIMIT_MESSAGES.tooManyConditions(limits.maxConditionsPerRule)));
  }
  return ok(command);
}

/**
 * The path of the first string (or key) over `max` UTF-8 bytes, e.g.
 * `rule.conditions.0.pattern`. Iterative: the request's depth is bounded
 * at parse time, and this walk would not need it to be.
 */
function findLongString(value: JsonValue, max: number): string | undefined {
  return findInJson(value, (node) => {
    if (node.key !== undefined && tooLong(node.key, max))
      return `A key in ${node.parentPath === '' ? 'the request' : node.parentPath}`;
    return typeof node.value === 'string' && tooLong(node.value, max) ? node.path : undefined;
  });
}

function tooLong(text: string, max: number): boolean {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most strings need no count.
  return text.length * 3 > max && Buffer.byteLength(text, 'utf8') > max;
}
