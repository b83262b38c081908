import type { MatrixErrorBody } from '../errors/error-catalogue.js';
import type { EvaluationEvent, EvaluationRecipient, EvaluationRoom } from '../evaluation/evaluation-input.js';
import type { PushAction, RuleBody } from '../push-rules/push-rule.js';
import type { RuleAddress } from '../push-rules/rule-address.js';
import type { PusherSetAction } from '../pushers/pusher.js';
import type { Reply } from '../contract/reply.js';
import type { DeletePushersSelector, NotifyRecipient } from './push-rules-client-options.js';
import type { PushRulesClient } from './push-rules-client.js';
import { PushRulesError } from './push-rules-error.js';

/**
 * The TypeScript client's side of the conformance run (contract/cases/,
 * docs/rpc-contract.md#examples): a request body as it goes on the wire
 * (with its `op`, and `message_id` for a write's idempotency key) turned
 * into the call of `PushRulesClient`'s typed method for that op, and what
 * the method resolves or rejects with turned back into the reply envelope.
 * A raw publish would test the workers, not the client: every field goes
 * through the method's parameters and options.
 */

/** A request that no call of a typed method can express: the conformance runner counts it as a failure. */
export class WireRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WireRequestError';
  }
}

type Body = Readonly<Record<string, unknown>>;

function text(body: Body, key: string): string {
  const value = body[key];
  if (typeof value !== 'string') throw new WireRequestError(`${key} must be a string for the typed method`);
  return value;
}

function optionalText(body: Body, key: string): string | undefined {
  return body[key] === undefined ? undefined : text(body, key);
}

function flag(body: Body, key: string): boolean {
  const value = body[key];
  if (typeof value !== 'boolean') throw new WireRequestError(`${key} must be a boolean for the typed method`);
  return value;
}

function optionalFlag(body: Body, key: string): boolean | undefined {
  return body[key] === undefined ? undefined : flag(body, key);
}

function list(body: Body, key: string): readonly unknown[] {
  const value = body[key];
  if (!Array.isArray(value)) throw new WireRequestError(`${key} must be an array for the typed method`);
  return value;
}

function texts(body: Body, key: string): readonly string[] {
  return list(body, key).map((value, i) => {
    if (typeof value !== 'string') throw new WireRequestError(`${key}.${i} must be a string for the typed method`);
    return value;
  });
}

function object(body: Body, key: string): Body {
  const value = body[key];
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new WireRequestError(`${key} must be an object for the typed method`);
  return value as Body;
}

function address(body: Body): RuleAddress {
  return { scope: text(body, 'scope'), kind: text(body, 'kind'), ruleId: text(body, 'rule_id') };
}

/** `{messageId}` when the request names one (absent: the client makes a fresh one). */
function writeOptions(body: Body): { messageId?: string } {
  const messageId = optionalText(body, 'message_id');
  return messageId === undefined ? {} : { messageId };
}

/** The one selector the typed method takes; two or none cannot be expressed by it. */
function selector(body: Body): DeletePushersSelector {
  const given: DeletePushersSelector[] = [];
  if (body['device_ids'] !== undefined) given.push({ deviceIds: texts(body, 'device_ids') });
  if (body['except_device_id'] !== undefined) given.push({ exceptDeviceId: text(body, 'except_device_id') });
  if (body['all'] !== undefined) {
    if (!flag(body, 'all')) throw new WireRequestError('all: false cannot be expressed by the typed method');
    given.push({ all: true });
  }
  const [only, ...others] = given;
  if (only === undefined || others.length > 0)
    throw new WireRequestError('deletePushers takes exactly one of device_ids, except_device_id and all');
  return only;
}

function evaluateArguments(body: Body) {
  const explain = optionalFlag(body, 'explain');
  // JSON forwarded as the homeserver has it: the workers refuse what is not an event, a room or recipients.
  return {
    event: object(body, 'event') as unknown as EvaluationEvent,
    room: object(body, 'room') as unknown as EvaluationRoom,
    recipients: list(body, 'recipients') as readonly EvaluationRecipient[],
    ...(explain === undefined ? {} : { explain }),
  };
}

/** What the typed method for the request's op resolves with (rejects with `PushRulesError` as the method does). */
async function call(client: PushRulesClient, body: Body): Promise<unknown> {
  const op = text(body, 'op');
  switch (op) {
    case 'get_pushrules':
      return client.getPushRules(text(body, 'user_id'));
    case 'get_pushrule':
      return client.getPushRule(text(body, 'user_id'), address(body));
    case 'set_pushrule': {
      const before = optionalText(body, 'before');
      const after = optionalText(body, 'after');
      // The rule as the front's caller sent it: the workers judge it.
      return client.setPushRule(text(body, 'user_id'), address(body), object(body, 'rule') as unknown as RuleBody, {
        ...writeOptions(body),
        ...(before === undefined ? {} : { before }),
        ...(after === undefined ? {} : { after }),
      });
    }
    case 'delete_pushrule':
      return client.deletePushRule(text(body, 'user_id'), address(body), writeOptions(body));
    case 'get_pushrule_actions':
      return client.getPushRuleActions(text(body, 'user_id'), address(body));
    case 'set_pushrule_actions':
      return client.setPushRuleActions(
        text(body, 'user_id'),
        address(body),
        list(body, 'actions') as readonly PushAction[],
        writeOptions(body),
      );
    case 'get_pushrule_enabled':
      return client.getPushRuleEnabled(text(body, 'user_id'), address(body));
    case 'set_pushrule_enabled':
      return client.setPushRuleEnabled(text(body, 'user_id'), address(body), flag(body, 'enabled'), writeOptions(body));
    case 'get_pushers':
      return client.getPushers(text(body, 'user_id'));
    case 'set_pusher': {
      const deviceId = optionalText(body, 'device_id');
      return client.setPusher(text(body, 'user_id'), object(body, 'action') as unknown as PusherSetAction, {
        ...writeOptions(body),
        ...(deviceId === undefined ? {} : { deviceId }),
      });
    }
    case 'delete_pushers': {
      const includeEmail = optionalFlag(body, 'include_email');
      return client.deletePushers(text(body, 'user_id'), selector(body), {
        ...writeOptions(body),
        ...(includeEmail === undefined ? {} : { includeEmail }),
      });
    }
    case 'delete_user_data':
      return client.deleteUserData(text(body, 'user_id'), writeOptions(body));
    case 'evaluate': {
      if (body['events'] === undefined) {
        const { event, room, recipients, explain } = evaluateArguments(body);
        return client.evaluate(event, room, recipients, explain === undefined ? {} : { explain });
      }
      const entries = list(body, 'events').map((entry, i) => {
        if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
          throw new WireRequestError(`events.${i} must be an object for the typed method`);
        return evaluateArguments(entry as Body);
      });
      const settled = await client.evaluateMany(entries);
      return {
        results: settled.map((result) =>
          result.status === 'fulfilled' ? { ok: true, body: result.value } : failed(result.reason),
        ),
      };
    }
    case 'notify':
      // Always with the reply: the envelope has a body only then.
      return client.notify(object(body, 'notification'), list(body, 'recipients') as readonly NotifyRecipient[], {
        reply: true,
        ...writeOptions(body),
      });
    default:
      throw new WireRequestError(`no typed method for op ${JSON.stringify(op)}`);
  }
}

/** A `PushRulesError` as the contract's error envelope; anything else is not the client's answer. */
function failed(error: unknown): Reply {
  if (!(error instanceof PushRulesError)) throw error;
  const body: MatrixErrorBody = {
    kind: error.kind,
    errcode: error.errcode,
    error: error.message,
    status: error.status,
  };
  return { ok: false, error: body };
}

/**
 * The reply envelope of one wire request, through the client's typed
 * method. Throws `WireRequestError` for a request no typed call expresses,
 * and whatever else the method throws besides `PushRulesError`.
 */
export async function replyThroughClient(client: PushRulesClient, request: Body): Promise<Reply> {
  let body: unknown;
  try {
    body = await call(client, request);
  } catch (error) {
    return failed(error);
  }
  return { ok: true, body };
}
