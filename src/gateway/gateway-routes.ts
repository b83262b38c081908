import type { PushRulesClient } from '../client/push-rules-client.js';
import type { PushAction, RuleBody } from '../push-rules/push-rule.js';
import type { RuleAddress } from '../push-rules/rule-address.js';
import type { PusherSetAction } from '../pushers/pusher.js';

/** The client calls the gateway makes; `PushRulesClient` in production, an object literal in tests. */
export type PushRulesApi = Pick<
  PushRulesClient,
  | 'getPushRules'
  | 'getPushRule'
  | 'setPushRule'
  | 'deletePushRule'
  | 'getPushRuleActions'
  | 'setPushRuleActions'
  | 'getPushRuleEnabled'
  | 'setPushRuleEnabled'
  | 'getPushers'
  | 'setPusher'
>;

/** The client-server API versions served: `r0` and `v3` (docs/push-rules.md#endpoints-and-operations). */
export const API_PREFIXES = ['/_matrix/client/r0', '/_matrix/client/v3'] as const;

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE';
export type Params = Readonly<Record<string, string>>;
/** What a handler is given of its request. */
export interface Call {
  readonly userId: string;
  /** The device of the access token, when the authenticator knows it. */
  readonly deviceId: string | undefined;
  readonly params: Params;
  readonly query: Readonly<Record<string, unknown>>;
  /** The parsed JSON body; `undefined` when there was none. */
  readonly body: unknown;
  readonly timeoutMs: number;
}
export type Handler = (api: PushRulesApi, call: Call) => Promise<unknown>;

export interface Route {
  readonly path: string;
  readonly handlers: Partial<Record<Method, Handler>>;
}

const address = (params: Params): RuleAddress => ({
  scope: params['scope'] ?? '',
  kind: params['kind'] ?? '',
  ruleId: params['ruleId'] ?? '',
});
const field = (body: unknown, name: string): unknown => (isObject(body) ? body[name] : undefined);
const queryString = (value: unknown) => (typeof value === 'string' ? value : undefined);

/**
 * The endpoints, relative to each prefix. Bodies go to the workers as the
 * client sent them: the workers validate every field (and answer
 * M_BAD_JSON), so the gateway checks only what keeps the gateway itself
 * safe: that a body is JSON, not nested past `maxJsonDepth`, and free of
 * prototype keys.
 */
export const ROUTES: readonly Route[] = [
  { path: '/pushrules/', handlers: { GET: async (api, c) => api.getPushRules(c.userId, { timeoutMs: c.timeoutMs }) } },
  {
    path: '/pushrules/global/',
    handlers: { GET: async (api, c) => (await api.getPushRules(c.userId, { timeoutMs: c.timeoutMs })).global },
  },
  {
    path: '/pushrules/:scope/:kind/:ruleId',
    handlers: {
      GET: async (api, c) => api.getPushRule(c.userId, address(c.params), { timeoutMs: c.timeoutMs }),
      PUT: async (api, c) => {
        const before = queryString(c.query['before']);
        const after = queryString(c.query['after']);
        return api.setPushRule(c.userId, address(c.params), c.body as RuleBody, {
          timeoutMs: c.timeoutMs,
          ...(before === undefined ? {} : { before }),
          ...(after === undefined ? {} : { after }),
        });
      },
      DELETE: async (api, c) => api.deletePushRule(c.userId, address(c.params), { timeoutMs: c.timeoutMs }),
    },
  },
  {
    path: '/pushrules/:scope/:kind/:ruleId/actions',
    handlers: {
      GET: async (api, c) => api.getPushRuleActions(c.userId, address(c.params), { timeoutMs: c.timeoutMs }),
      PUT: async (api, c) =>
        api.setPushRuleActions(c.userId, address(c.params), field(c.body, 'actions') as readonly PushAction[], {
          timeoutMs: c.timeoutMs,
        }),
    },
  },
  {
    path: '/pushrules/:scope/:kind/:ruleId/enabled',
    handlers: {
      GET: async (api, c) => api.getPushRuleEnabled(c.userId, address(c.params), { timeoutMs: c.timeoutMs }),
      PUT: async (api, c) =>
        api.setPushRuleEnabled(c.userId, address(c.params), field(c.body, 'enabled') as boolean, {
          timeoutMs: c.timeoutMs,
        }),
    },
  },
  { path: '/pushers', handlers: { GET: async (api, c) => api.getPushers(c.userId, { timeoutMs: c.timeoutMs }) } },
  {
    path: '/pushers/set',
    // The device is the token's: a `device_id` in the body is the client's and the workers ignore it.
    handlers: {
      POST: async (api, c) =>
        api.setPusher(c.userId, c.body as PusherSetAction, {
          timeoutMs: c.timeoutMs,
          ...(c.deviceId === undefined ? {} : { deviceId: c.deviceId }),
        }),
    },
  },
];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
