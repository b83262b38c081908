import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load-config.js';
import { ENVIRONMENT } from '../../src/config/worker-environment.js';

/** The default file with `amqp.url` replaced, written where CONFIG_FILE can point. */
function configFileWithBrokers(url: unknown): string {
  const defaults = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as {
    amqp: Record<string, unknown>;
  };
  const file = join(mkdtempSync(join(tmpdir(), 'push-config-')), 'config.json');
  writeFileSync(file, JSON.stringify({ ...defaults, amqp: { ...defaults.amqp, url } }));
  return file;
}

describe('configuration', () => {
  it('loads the defaults, frozen', () => {
    const config = loadConfig({});
    expect(config.amqp).toMatchObject({ queue: 'matrix.push.rpc', queueType: 'quorum', prefetch: 32 });
    expect(config.limits.maxRequestBytes).toBe(65536);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.amqp)).toBe(true);
  });

  it('applies environment variables', () => {
    const config = loadConfig({
      AMQP_URL: 'amqp://u:p@broker:5672/v',
      RPC_PREFETCH: '8',
      ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
      LOG_LEVEL: 'debug',
    });
    expect(config.amqp.url).toEqual(['amqp://u:p@broker:5672/v']);
    expect(config.amqp.prefetch).toBe(8);
    expect(config.pushers.allowInsecureGateways).toBe(true);
    expect(config.log.level).toBe('debug');
  });

  it('reads a list variable as comma-separated names', () => {
    expect(loadConfig({ TRUSTED_PUBLISHERS: ' front-1, front-2 ,,' }).amqp.trustedPublishers).toEqual([
      'front-1',
      'front-2',
    ]);
    expect(loadConfig({}).amqp.trustedPublishers).toEqual([]);
  });

  it('reads AMQP_URL as the nodes of a cluster, comma-separated', () => {
    const urls = 'amqp://u:p@rabbit-1:5672/v, amqp://u:p@rabbit-2:5672/v,amqp://u:p@rabbit-3/v';
    expect(loadConfig({ AMQP_URL: urls }).amqp.url).toEqual([
      'amqp://u:p@rabbit-1:5672/v',
      'amqp://u:p@rabbit-2:5672/v',
      'amqp://u:p@rabbit-3/v',
    ]);
  });

  it('takes the nodes of a cluster as an array in the file, and one URL as a string', () => {
    const nodes = ['amqp://u:p@rabbit-1:5672', 'amqp://u:p@rabbit-2:5672'];
    expect(loadConfig({ CONFIG_FILE: configFileWithBrokers(nodes) }).amqp.url).toEqual(nodes);
    expect(loadConfig({ CONFIG_FILE: configFileWithBrokers('amqp://u:p@rabbit-1:5672') }).amqp.url).toBe(
      'amqp://u:p@rabbit-1:5672',
    );
  });

  it.each([
    ['an empty list', [], 'amqp.url (AMQP_URL)'],
    [
      'a list with a bad entry',
      ['amqp://rabbit-1', 'https://rabbit-2'],
      'amqp.url (AMQP_URL): broker URL #2 must start with amqp:// or amqps://',
    ],
  ])('refuses amqp.url in the file as %s', (_case, url, message) => {
    expect(() => loadConfig({ CONFIG_FILE: configFileWithBrokers(url) })).toThrow(message);
  });

  it.each([
    [
      'a scheme that is not AMQP',
      'http://rabbit:5672',
      'amqp.url (AMQP_URL): broker URL #1 must start with amqp:// or amqps://',
    ],
    [
      'one bad entry of three',
      'amqp://a:5672,rabbit-2:5672,amqp://c:5672',
      'amqp.url (AMQP_URL): broker URL #2 must start with amqp:// or amqps://',
    ],
    [
      'the same node twice (the default port spelled out once)',
      'amqp://rabbit:5672,amqp://rabbit',
      'broker rabbit:5672 is listed twice',
    ],
    ['a URL that does not parse', 'amqp://rabbit:port', 'broker URL #1 is not a URL'],
  ])('refuses AMQP_URL with %s', (_case, url, message) => {
    expect(() => loadConfig({ AMQP_URL: url })).toThrow(message);
  });

  it('never puts a password into a broker URL error', () => {
    expect(() => loadConfig({ AMQP_URL: 'amqp://user:s3cret@rabbit:port' })).toThrow(
      'amqp.url (AMQP_URL): broker URL #1 is not a URL',
    );
    expect(() => loadConfig({ AMQP_URL: 'amqp://user:s3cret@rabbit:port' })).not.toThrow(/s3cret/);
  });

  it('refuses a reconnect backoff whose base is above its cap', () => {
    expect(() => loadConfig({ AMQP_RECONNECT_BASE_MS: '2000', AMQP_RECONNECT_MAX_MS: '1000' })).toThrow(
      'must not exceed amqp.reconnectMaxMs',
    );
  });

  it.each([
    ['injection off, as the old default file had it', { crashOnUserId: '', crashAfterApplyOnUserId: '' }],
    ['an empty section', {}],
  ])('still loads a file written before fault injection left the worker: %s', (_case, faults) => {
    const defaults = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as object;
    const file = join(mkdtempSync(join(tmpdir(), 'push-config-')), 'config.json');
    writeFileSync(file, JSON.stringify({ ...defaults, faults }));
    expect(Object.keys(loadConfig({ CONFIG_FILE: file }))).not.toContain('faults');
  });

  it('refuses a file that turns the retired fault injection on, and says why', () => {
    const defaults = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as object;
    const file = join(mkdtempSync(join(tmpdir(), 'push-config-')), 'config.json');
    writeFileSync(
      file,
      JSON.stringify({ ...defaults, faults: { crashOnUserId: '@x:example.org', crashAfterApplyOnUserId: '' } }),
    );
    expect(() => loadConfig({ CONFIG_FILE: file })).toThrow(
      /faults \(fault injection\) is no longer a setting of the worker: remove the section/,
    );
  });

  it('knows nothing of fault injection: no such section, no FAULT_* variable (the fault tests have an entry point of their own)', () => {
    expect(Object.keys(loadConfig({}))).not.toContain('faults');
    expect(ENVIRONMENT.filter((variable) => variable.name.startsWith('FAULT'))).toEqual([]);
  });

  it('keeps the ruleset limit far below the 16 MiB MongoDB document limit', () => {
    expect(() => loadConfig({ MAX_RULESET_BYTES: String(16 * 1024 * 1024) })).toThrow(
      'limits.maxRulesetBytes (MAX_RULESET_BYTES) must be <= 8388608',
    );
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
