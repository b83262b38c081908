import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { parseBrokerAddresses, type BrokerUrls } from './broker-urls.js';
import { ConfigSchema, type Config } from './config-schema.js';
import { ENVIRONMENT, type EnvironmentKind } from './worker-environment.js';
import { parseWorkerRoles, type WorkerRoles } from './worker-roles.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const DEFAULT_FILE = new URL('../../config/default.json', import.meta.url);
const ajv = new Ajv({ strict: true, allErrors: true });
const validateConfig = ajv.compile<Config>(ConfigSchema);

/** Environment variables, each overriding one `section.key` setting. */
export type EnvironmentList = readonly {
  readonly name: string;
  readonly path: readonly [string, string];
  readonly kind: EnvironmentKind;
}[];

/** What a process's settings are made of: a default file, its schema, its variables. */
export interface SettingsSpec<T> {
  readonly defaultFile: URL;
  readonly validate: ValidateFunction<T>;
  readonly environment: EnvironmentList;
  /** Turns what an older file may still hold into today's form, before the environment and validation. */
  readonly migrate?: (raw: unknown) => unknown;
}

/**
 * Reads `config/default.json` (or `CONFIG_FILE`), applies the environment
 * variables of `ENVIRONMENT`, validates the result once and freezes it.
 * Throws `ConfigError` naming every bad setting (and its variable).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const config = loadSettings(
    { defaultFile: DEFAULT_FILE, validate: validateConfig, environment: ENVIRONMENT, migrate: dropRetiredFaults },
    env,
  );
  checkBrokerUrls(config.amqp.url);
  workerRolesOf(config);
  if (config.amqp.reconnectBaseMs > config.amqp.reconnectMaxMs) {
    throw new ConfigError(
      'invalid configuration: amqp.reconnectBaseMs (AMQP_RECONNECT_BASE_MS) must not exceed amqp.reconnectMaxMs (AMQP_RECONNECT_MAX_MS)',
    );
  }
  if (config.delivery.retryBaseMs > config.delivery.retryMaxMs) {
    throw new ConfigError(
      'invalid configuration: delivery.retryBaseMs (DELIVERY_RETRY_BASE_MS) must not exceed delivery.retryMaxMs (DELIVERY_RETRY_MAX_MS)',
    );
  }
  return config;
}

/** The roles `worker.roles` (`WORKER_ROLES`) names; `ConfigError` saying what is wrong with them. */
export function workerRolesOf(config: Pick<Config, 'worker'>): WorkerRoles {
  const parsed = parseWorkerRoles(config.worker.roles);
  if (!parsed.ok) throw new ConfigError(`invalid configuration: worker.roles (WORKER_ROLES) ${parsed.problem}`);
  return parsed.roles;
}

/**
 * `amqp.url` (`AMQP_URL`) past the schema, which takes any text: each entry
 * an amqp(s) URL with a host, no node twice; the error names the entry by
 * its position, never its text (a password may be in it).
 */
export function checkBrokerUrls(urls: BrokerUrls): void {
  try {
    parseBrokerAddresses(urls);
  } catch (error) {
    throw new ConfigError(`invalid configuration: amqp.url (AMQP_URL): ${(error as Error).message}`);
  }
}

/**
 * Configuration files written before fault injection left the worker hold a
 * `faults` section (copied from the old config/default.json, every value
 * empty). Such a section, with injection off, is dropped so that those files
 * keep working; one that turns injection on is refused: the production
 * worker can no longer crash itself on purpose, and a file that expects it
 * to is a mistake to point out, not to ignore.
 */
function dropRetiredFaults(raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || !Object.hasOwn(raw, 'faults')) return raw;
  const { faults, ...rest } = raw as Record<string, unknown>;
  const values = typeof faults === 'object' && faults !== null ? Object.values(faults) : [faults];
  if (values.some((value) => value !== '')) {
    throw new ConfigError(
      'invalid configuration: faults (fault injection) is no longer a setting of the worker: remove the section (the fault tests have an entry point of their own)',
    );
  }
  return rest;
}

/** `loadConfig` for any process: the file (or `CONFIG_FILE`), then the environment, validated once, frozen. */
export function loadSettings<T>(spec: SettingsSpec<T>, env: NodeJS.ProcessEnv = process.env): Readonly<T> {
  const file = env['CONFIG_FILE'] ?? spec.defaultFile;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`cannot read the configuration file ${String(file)}: ${(error as Error).message}`);
  }
  const config = applyEnvironment(spec.migrate === undefined ? raw : spec.migrate(raw), spec.environment, env);
  const { validate } = spec;
  if (!validate(config)) {
    const problems = (validate.errors ?? []).map((e) => {
      const setting = e.instancePath.slice(1).replaceAll('/', '.') || 'configuration';
      const variable = spec.environment.find((v) => v.path.join('.') === setting)?.name;
      return `${setting}${variable === undefined ? '' : ` (${variable})`} ${e.message ?? 'is invalid'}`;
    });
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  return deepFreeze(config);
}

/** Compiles a settings schema with the same strict options as the worker's. */
export function compileSettingsSchema<T>(schema: object): ValidateFunction<T> {
  return ajv.compile<T>(schema);
}

function applyEnvironment(raw: unknown, environment: EnvironmentList, env: NodeJS.ProcessEnv): unknown {
  const config = structuredClone(raw) as Record<string, Record<string, unknown>>;
  for (const { name, path, kind } of environment) {
    const text = env[name];
    if (text === undefined || text === '') continue;
    const [section, key] = path;
    config[section] ??= {};
    config[section][key] = parse(name, text, kind);
  }
  return config;
}

function parse(name: string, text: string, kind: EnvironmentKind): unknown {
  switch (kind) {
    case 'string':
      return text;
    case 'list':
      // Comma-separated; blanks around names are not part of them.
      return text
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    case 'integer':
      if (!/^-?\d+$/.test(text.trim()))
        throw new ConfigError(`${name} must be an integer, got ${JSON.stringify(text)}`);
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
