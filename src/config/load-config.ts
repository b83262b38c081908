import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { ConfigSchema, ENVIRONMENT, type Config, type EnvironmentKind } from './config-schema.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const DEFAULT_FILE = new URL('../../config/default.json', import.meta.url);
const validate = new Ajv({ strict: true, allErrors: true }).compile<Config>(ConfigSchema);

/**
 * Reads `config/default.json` (or `CONFIG_FILE`), applies the environment
 * variables of `ENVIRONMENT`, validates the result once and freezes it.
 * Throws `ConfigError` naming every bad setting (and its variable).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const file = env['CONFIG_FILE'] ?? DEFAULT_FILE;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`cannot read the configuration file ${String(file)}: ${(error as Error).message}`);
  }
  const config = applyEnvironment(raw, env);
  if (!validate(config)) {
    const problems = (validate.errors ?? []).map((e) => {
      const setting = e.instancePath.slice(1).replaceAll('/', '.') || 'configuration';
      const variable = ENVIRONMENT.find((v) => v.path.join('.') === setting)?.name;
      return `${setting}${variable === undefined ? '' : ` (${variable})`} ${e.message ?? 'is invalid'}`;
    });
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  return deepFreeze(config);
}

function applyEnvironment(raw: unknown, env: NodeJS.ProcessEnv): unknown {
  const config = structuredClone(raw) as Record<string, Record<string, unknown>>;
  for (const { name, path, kind } of ENVIRONMENT) {
    const text = env[name];
    if (text === undefined || text === '') continue;
    const [section, key] = path;
    config[section] ??= {};
    (config[section])[key] = parse(name, text, kind);
  }
  return config;
}

function parse(name: string, text: string, kind: EnvironmentKind): unknown {
  switch (kind) {
    case 'string':
      return text;
    case 'list':
      // Comma-separated; blanks around names are not part of them.
      return text.split(',').map((item) => item.trim()).filter((item) => item !== '');
    case 'integer':
      if (!/^-?\d+$/.test(text.trim())) throw new ConfigError(`${name} must be an integer, got ${JSON.stringify(text)}`);
      return Number(text);
    case 'boolean':
      if (!['true', 'false', '1', '0'].includes(text.trim())) {
        throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(text)}`);
      }
      return ['true', '1'].includes(text.trim());
  }
}

function deepFreeze<T>(value: T): Readonly<T> {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
