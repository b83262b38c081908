import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load-config.js';

describe('configuration', () => {
  it('loads the defaults, frozen', () => {
    const config = loadConfig({});
    expect(config.amqp).toMatchObject({ queue: 'matrix.push.rpc', queueType: 'quorum', prefetch: 32 });
    expect(config.limits.maxRequestBytes).toBe(65536);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.amqp)).toBe(true);
  });

  it('applies environment variables', () => {
    const config = loadConfig({ AMQP_URL: 'amqp://u:p@broker:5672/v', RPC_PREFETCH: '8', ALLOW_INSECURE_PUSH_GATEWAYS: 'true', LOG_LEVEL: 'debug' });
    expect(config.amqp.url).toBe('amqp://u:p@broker:5672/v');
    expect(config.amqp.prefetch).toBe(8);
    expect(config.pushers.allowInsecureGateways).toBe(true);
    expect(config.log.level).toBe('debug');
  });

  it('reads a list variable as comma-separated names', () => {
    expect(loadConfig({ TRUSTED_PUBLISHERS: ' front-1, front-2 ,,' }).amqp.trustedPublishers).toEqual(['front-1', 'front-2']);
    expect(loadConfig({}).amqp.trustedPublishers).toEqual([]);
  });

  it('has every fault injection off by default', () => {
    expect(loadConfig({}).faults).toEqual({ crashOnUserId: '', crashAfterApplyOnUserId: '' });
  });

  it('keeps the ruleset limit far below the 16 MiB MongoDB document limit', () => {
    expect(() => loadConfig({ MAX_RULESET_BYTES: String(16 * 1024 * 1024) })).toThrow('limits.maxRulesetBytes (MAX_RULESET_BYTES) must be <= 8388608');
  });

  it.each([
    [{ RPC_PREFETCH: 'lots' }, 'RPC_PREFETCH must be an integer, got "lots"'],
    [{ RPC_PREFETCH: '0' }, 'amqp.prefetch (RPC_PREFETCH) must be >= 1'],
    [{ RPC_QUEUE_TYPE: 'stream' }, 'amqp.queueType (RPC_QUEUE_TYPE)'],
    [{ MONGODB_URL: 'postgres://x' }, 'mongodb.url (MONGODB_URL) must match pattern'],
    [{ ALLOW_INSECURE_PUSH_GATEWAYS: 'yes' }, 'ALLOW_INSECURE_PUSH_GATEWAYS must be true or false'],
    [{ LOG_LEVEL: 'loud' }, 'log.level (LOG_LEVEL)'],
    [{ TRUSTED_PUBLISHERS: 'a,a' }, 'amqp.trustedPublishers (TRUSTED_PUBLISHERS) must NOT have duplicate items'],
    [{ HEALTH_PORT: '70000' }, 'health.port (HEALTH_PORT) must be <= 65535'],
    [{ MAX_USER_RULES: '0' }, 'limits.maxUserRules (MAX_USER_RULES) must be >= 1'],
    [{ CONFIG_FILE: '/nonexistent.json' }, 'cannot read the configuration file /nonexistent.json'],
  ])('refuses %o naming the setting', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
