import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/load-config.js';
import { loadGatewayConfig } from '../../src/gateway/gateway-config.js';
import { TokenFileAuthenticator } from '../../src/gateway/token-file-authenticator.js';

const fileWith = (content: string) => {
  const path = join(mkdtempSync(join(tmpdir(), 'tokens-')), 'tokens.json');
  writeFileSync(path, content);
  return path;
};

describe('TokenFileAuthenticator', () => {
  it('answers the user of a listed token and unknown for any other', async () => {
    const auth = TokenFileAuthenticator.fromFile(fileWith('{"t1": "@alice:example.org"}'));
    expect(await auth.authenticate('t1')).toEqual({ userId: '@alice:example.org' });
    expect(await auth.authenticate('t2')).toEqual({
      rejected: { status: 401, errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown access token.', softLogout: false },
    });
  });

  it('answers the user and the device of a token listed with one; the old format still works beside it', async () => {
    const auth = TokenFileAuthenticator.fromFile(
      fileWith(
        '{"old": "@alice:example.org", "phone": {"user_id": "@alice:example.org", "device_id": "PHONE"}, "bare": {"user_id": "@bob:example.org"}}',
      ),
    );
    expect(await auth.authenticate('old')).toStrictEqual({ userId: '@alice:example.org' });
    expect(await auth.authenticate('phone')).toStrictEqual({ userId: '@alice:example.org', deviceId: 'PHONE' });
    expect(await auth.authenticate('bare')).toStrictEqual({ userId: '@bob:example.org' });
  });

  it.each([
    ['not JSON', '{'],
    ['not an object', '["@alice:example.org"]'],
    ['an invalid user ID', '{"t1": "alice"}'],
    ['an empty token', '{"": "@alice:example.org"}'],
    ['an entry that is neither a user ID nor an object', '{"t1": 5}'],
    ['an entry that is a list', '{"t1": ["@alice:example.org"]}'],
    ['an object without user_id', '{"t1": {"device_id": "D"}}'],
    ['an object with an invalid user_id', '{"t1": {"user_id": "alice", "device_id": "D"}}'],
    ['a device_id that is not a string', '{"t1": {"user_id": "@alice:example.org", "device_id": 5}}'],
    ['an empty device_id', '{"t1": {"user_id": "@alice:example.org", "device_id": ""}}'],
  ])('refuses a file with %s', (_name, content) => {
    expect(() => TokenFileAuthenticator.fromFile(fileWith(content))).toThrow(ConfigError);
  });
});

describe('gateway configuration', () => {
  it('has defaults that validate', () => {
    const config = loadGatewayConfig({});
    expect(config.http).toEqual({
      host: '0.0.0.0',
      port: 8090,
      maxBodyBytes: 65536,
      maxJsonDepth: 31,
      requestTimeoutMs: 10000,
      maxInFlight: 512,
    });
    expect(config.auth).toMatchObject({ kind: 'homeserver', cacheSeconds: 30, timeoutMs: 5000 });
    expect(config.rateLimit).toEqual({ writesPerSecond: 10, burst: 50, maxUsers: 100000 });
    expect(Object.isFrozen(config.auth)).toBe(true);
  });

  it('reads the rate limit from the environment, 0 writes per second included', () => {
    const config = loadGatewayConfig({
      GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '0',
      GATEWAY_RATE_LIMIT_BURST: '5',
      GATEWAY_RATE_LIMIT_MAX_USERS: '7',
    });
    expect(config.rateLimit).toEqual({ writesPerSecond: 0, burst: 5, maxUsers: 7 });
  });

  it('reads the environment', () => {
    const config = loadGatewayConfig({
      GATEWAY_PORT: '9000',
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: '/tmp/t.json',
      HOMESERVER_URL: 'https://hs.example.org',
    });
    expect(config.http.port).toBe(9000);
    expect(loadGatewayConfig({ GATEWAY_MAX_IN_FLIGHT: '8' }).http.maxInFlight).toBe(8);
    expect(config.auth).toMatchObject({
      kind: 'token-file',
      tokenFile: '/tmp/t.json',
      homeserverUrl: 'https://hs.example.org',
    });
  });

  it.each([
    [{ AUTH_KIND: 'token-file' }, 'auth.tokenFile (AUTH_TOKEN_FILE) is required'],
    [{ AUTH_KIND: 'ldap' }, 'auth.kind (AUTH_KIND)'],
    [{ HOMESERVER_URL: 'hs.example.org' }, 'auth.homeserverUrl (HOMESERVER_URL)'],
    [{ GATEWAY_REQUEST_TIMEOUT_MS: '10' }, 'http.requestTimeoutMs (GATEWAY_REQUEST_TIMEOUT_MS)'],
    [{ GATEWAY_MAX_IN_FLIGHT: '0' }, 'http.maxInFlight (GATEWAY_MAX_IN_FLIGHT)'],
    [
      { GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '-1' },
      'rateLimit.writesPerSecond (GATEWAY_RATE_LIMIT_WRITES_PER_SECOND)',
    ],
    [{ GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '0.5' }, 'GATEWAY_RATE_LIMIT_WRITES_PER_SECOND must be an integer'],
    [{ GATEWAY_RATE_LIMIT_BURST: '0' }, 'rateLimit.burst (GATEWAY_RATE_LIMIT_BURST)'],
    [{ GATEWAY_RATE_LIMIT_MAX_USERS: '0' }, 'rateLimit.maxUsers (GATEWAY_RATE_LIMIT_MAX_USERS)'],
  ])('refuses %j naming the setting', (env, message) => {
    expect(() => loadGatewayConfig(env)).toThrow(message);
  });
});
