import { describe, expect, it } from 'vitest';
import {
  LOCAL_GATEWAY_ENVIRONMENT,
  LOCAL_GATEWAY_MAX_BODY_BYTES,
  localGatewaySettings,
} from '../../src/local-push-gateway/local-gateway-settings.js';

describe('localGatewaySettings', () => {
  it.each([
    ['nothing set', {}, { host: '127.0.0.1', port: 8091, reject: [] }],
    [
      'empty values',
      { LOCAL_PUSH_GATEWAY_HOST: '', LOCAL_PUSH_GATEWAY_PORT: ' ' },
      { host: '127.0.0.1', port: 8091, reject: [] },
    ],
    [
      'host and port',
      { LOCAL_PUSH_GATEWAY_HOST: '0.0.0.0', LOCAL_PUSH_GATEWAY_PORT: '9000' },
      { host: '0.0.0.0', port: 9000, reject: [] },
    ],
    ['port 0', { LOCAL_PUSH_GATEWAY_PORT: '0' }, { host: '127.0.0.1', port: 0, reject: [] }],
    [
      'pushkeys to reject',
      { LOCAL_PUSH_GATEWAY_REJECT: ' key1, key2 ,,' },
      { host: '127.0.0.1', port: 8091, reject: ['key1', 'key2'] },
    ],
  ])('%s', (_name, env, expected) => {
    const check = localGatewaySettings(env);
    expect(check.ok && { ...check.settings, reject: [...check.settings.reject] }).toEqual({
      ...expected,
      maxBodyBytes: LOCAL_GATEWAY_MAX_BODY_BYTES,
    });
  });

  it.each(['-1', '65536', 'http', '80.5'])('refuses LOCAL_PUSH_GATEWAY_PORT=%s', (port) => {
    expect(localGatewaySettings({ LOCAL_PUSH_GATEWAY_PORT: port })).toEqual({
      ok: false,
      error: `LOCAL_PUSH_GATEWAY_PORT must be a port number (0-65535), not "${port}"`,
    });
  });
});

describe('LOCAL_GATEWAY_ENVIRONMENT', () => {
  it('names every variable with the default the settings take when it is unset', () => {
    const defaults = Object.fromEntries(LOCAL_GATEWAY_ENVIRONMENT.map((variable) => [variable.name, variable.default]));
    expect(localGatewaySettings(defaults)).toEqual(localGatewaySettings({}));
    expect(Object.keys(defaults)).toEqual([
      'LOCAL_PUSH_GATEWAY_HOST',
      'LOCAL_PUSH_GATEWAY_PORT',
      'LOCAL_PUSH_GATEWAY_REJECT',
    ]);
  });
});
