import { Ajv, type ValidateFunction } from 'ajv';
import { LIMIT_MESSAGES, matrixError, MESSAGES } from '../errors/error-catalogue.js';
import { isJsonObject, type JsonObject } from '../matrix/json.js';
import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import { isValidUserId } from '../matrix/user-id.js';
import type { RawPusherSetAction } from '../pushers/decide-pusher-set.js';
import type { DeviceSelector } from '../pushers/pusher-deletion.js';
import { validateActions } from '../push-rules/validate-actions.js';
import { validateRuleBody } from '../push-rules/validate-rule-body.js';
import { fail, ok, type Result } from '../result/result.js';
import type { Command } from '../service/command.js';
import { checkRequestLimits, type RequestLimits } from './request-limits.js';
import { describeSchemaError } from './schema-error.js';
import { isOp } from '../contract/ops.js';
import { REQUEST_SCHEMAS, type Op, type RequestOf } from '../contract/request-schemas.js';

// Compiled once per process; compiling on the request path would cost more
// than the whole operation.
const ajv = new Ajv({ strict: true, allErrors: false, coerceTypes: false, useDefaults: false });
const validators = Object.fromEntries(
  Object.entries(REQUEST_SCHEMAS).map(([op, schema]) => [op, ajv.compile(schema)]),
) as { readonly [O in Op]: ValidateFunction<RequestOf<O>> };

/**
 * Turns a raw request body into a command, or the contract's error for it:
 * TooLarge, BadJson (not JSON, nested deeper than `maxJsonDepth`, a key
 * `__proto__`/`constructor`/`prototype` anywhere, not an object, schema,
 * user ID, rule body),
 * Unrecognized (unknown op) or InvalidParam (over a per-request limit).
 * Nothing here touches storage.
 */
export function parseRequest(body: Uint8Array, limits: RequestLimits): Result<Command> {
  if (body.byteLength > limits.maxRequestBytes) {
    return fail(matrixError('TooLarge', LIMIT_MESSAGES.requestTooLarge(limits.maxRequestBytes)));
  }
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  // Too deep is BadJson, not TooLarge: the body is small, its shape is
  // what the contract refuses (like a schema failure), and a 413 would
  // tell an HTTP client to send fewer bytes.
  const parsed = parseUntrustedJson(text, { maxDepth: limits.maxJsonDepth });
  if (!parsed.ok)
    return fail(
      matrixError('BadJson', parsed.problem === 'not-json' ? 'Request body is not valid JSON.' : parsed.message),
    );
  const json = parsed.value;
  if (!isJsonObject(json)) return fail(matrixError('BadJson', 'Request body must be a JSON object.'));
  const command = parseRequestObject(json);
  return command.ok ? checkRequestLimits(json, command.value, limits) : command;
}

function parseRequestObject(json: JsonObject): Result<Command> {
  const op = json['op'];
  if (typeof op !== 'string') return fail(matrixError('BadJson', 'Request needs a string op.'));
  if (op === 'evaluate') return fail(matrixError('Unrecognized', MESSAGES.evaluateOnItsQueue));
  if (!isOp(op)) return fail(matrixError('Unrecognized', `Unrecognized op: ${JSON.stringify(op)}.`));
  const validate = validators[op];
  if (!validate(json)) return fail(matrixError('BadJson', describeSchemaError(validate.errors?.[0])));
  const request = json as RequestOf<typeof op>;
  if (!isValidUserId(request.user_id)) return fail(matrixError('BadJson', 'user_id is not a valid Matrix user ID.'));
  return toCommand(request);
}

function toCommand(request: RequestOf<Op>): Result<Command> {
  const userId = request.user_id;
  switch (request.op) {
    case 'get_pushrules':
    case 'get_pushers':
      return ok({ op: request.op, userId });
    case 'get_pushrule':
    case 'delete_pushrule':
    case 'get_pushrule_actions':
    case 'get_pushrule_enabled':
      return ok({ op: request.op, userId, address: addressOf(request) });
    case 'set_pushrule': {
      const body = validateRuleBody(request.kind, request.rule);
      if (!body.ok) return body;
      const { scope, kind, rule_id: ruleId, before, after } = request;
      return ok({ op: 'set_pushrule', userId, request: { scope, kind, ruleId, body: body.value, before, after } });
    }
    case 'set_pushrule_actions': {
      const actions = validateActions(request.actions);
      if (!actions.ok) return actions;
      return ok({ op: 'set_pushrule_actions', userId, address: addressOf(request), actions: actions.value });
    }
    case 'set_pushrule_enabled':
      return ok({ op: 'set_pushrule_enabled', userId, address: addressOf(request), enabled: request.enabled });
    case 'set_pusher': {
      // `data` came out of JSON.parse, so its unknown values are JSON values.
      const action = request.action as RawPusherSetAction;
      const deviceId = request.device_id;
      return ok(
        deviceId === undefined ? { op: 'set_pusher', userId, action } : { op: 'set_pusher', userId, action, deviceId },
      );
    }
    case 'delete_pushers': {
      const devices = deviceSelectorOf(request);
      if (!devices.ok) return devices;
      return ok({ op: 'delete_pushers', userId, devices: devices.value, includeEmail: request.include_email === true });
    }
    case 'delete_user_data':
      return ok({ op: 'delete_user_data', userId });
  }
}

export const DEVICE_SELECTOR_MESSAGES = {
  none: 'delete_pushers needs one of device_ids, except_device_id or all.',
  several: 'delete_pushers takes only one of device_ids, except_device_id and all.',
  allFalse: 'all must be true when given.',
} as const;

/** Exactly one of `device_ids`, `except_device_id` and `all: true`. */
function deviceSelectorOf(request: RequestOf<'delete_pushers'>): Result<DeviceSelector> {
  const { device_ids: deviceIds, except_device_id: exceptDeviceId, all } = request;
  if (all === false) return fail(matrixError('BadJson', DEVICE_SELECTOR_MESSAGES.allFalse));
  const given = [deviceIds, exceptDeviceId, all].filter((selector) => selector !== undefined).length;
  if (given === 0) return fail(matrixError('BadJson', DEVICE_SELECTOR_MESSAGES.none));
  if (given > 1) return fail(matrixError('BadJson', DEVICE_SELECTOR_MESSAGES.several));
  if (deviceIds !== undefined) return ok({ deviceIds });
  if (exceptDeviceId !== undefined) return ok({ exceptDeviceId });
  return ok({ all: true });
}

function addressOf(request: { scope: string; kind: string; rule_id: string }) {
  return { scope: request.scope, kind: request.kind, ruleId: request.rule_id };
}
