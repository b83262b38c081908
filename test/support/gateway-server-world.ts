import type { FastifyInstance } from 'fastify';
import { afterEach } from 'vitest';
import type { Authenticator } from '../../src/gateway/authenticator.js';
import { buildGatewayServer, type GatewayServerOptions } from '../../src/gateway/gateway-server.js';
import type { PushRulesApi } from '../../src/gateway/gateway-routes.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';
import { createLogger } from '../../src/logging/logger.js';

/**
 * The gateway server the tests of test/gateway/gateway-server*.test.ts talk
 * to: one user with one token, an api that records its calls, and a server
 * built on them that is closed after each test (`useGatewayServers`).
 */

export const ALICE = '@alice:example.org';
export const TOKEN = 'alice-token';
export const RULESET = { override: [], content: [], room: [], sender: [], underride: [] };
/** The deepest a body may nest here (http.maxJsonDepth). */
export const MAX_DEPTH = 8;

interface Recorded {
  readonly method: string;
  readonly args: unknown[];
}

/** An api that records its calls and answers `{}` (or what `answers` says). */
export function recordingApi(
  answers: Partial<Record<keyof PushRulesApi, (...args: unknown[]) => Promise<unknown>>> = {},
) {
  const calls: Recorded[] = [];
  const method =
    (name: keyof PushRulesApi, fallback: unknown = {}) =>
    async (...args: unknown[]): Promise<unknown> => {
      calls.push({ method: name, args });
      const answer = answers[name];
      if (answer === undefined) return Promise.resolve(fallback);
      return answer(...args);
    };
  const api = {
    getPushRules: method('getPushRules', { global: RULESET }),
    getPushRule: method('getPushRule', { rule_id: 'r', default: false, enabled: true, actions: [] }),
    setPushRule: method('setPushRule'),
    deletePushRule: method('deletePushRule'),
    getPushRuleActions: method('getPushRuleActions', { actions: ['notify'] }),
    setPushRuleActions: method('setPushRuleActions'),
    getPushRuleEnabled: method('getPushRuleEnabled', { enabled: true }),
    setPushRuleEnabled: method('setPushRuleEnabled'),
    getPushers: method('getPushers', { pushers: [] }),
    setPusher: method('setPusher'),
  } as unknown as PushRulesApi;
  return { api, calls };
}

let app: FastifyInstance | undefined;
/** Closes the server of each test after it: call once at the top of a test file. */
export function useGatewayServers(): void {
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
}

/** A server on `api`, closed after the test; `more` sets what a test is about. */
export function gateway(
  api: PushRulesApi,
  authenticator: Authenticator = new TokenFileAuthenticator({ [TOKEN]: ALICE }),
  more: Partial<
    Pick<
      GatewayServerOptions,
      'writeRateLimit' | 'maxInFlight' | 'now' | 'observer' | 'logger' | 'maxBodyBytes' | 'maxJsonDepth'
    >
  > = {},
) {
  app = buildGatewayServer({
    api,
    authenticator,
    logger: createLogger('silent'),
    maxBodyBytes: 4096,
    maxJsonDepth: MAX_DEPTH,
    requestTimeoutMs: 1234,
    ...more,
  });
  return app;
}

export const auth = { authorization: `Bearer ${TOKEN}` };
export const RULE_PATH = 'pushrules/global/room/!r%3Aexample.org';
