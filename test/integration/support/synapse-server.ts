import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real Synapse for the import and module tests: `matrix-synapse` from
 * PyPI in a virtualenv created once and cached (SYNAPSE_CACHE_DIR, else
 * ~/.cache/matrix-push-worker), started on a free port of 127.0.0.1 in a
 * temporary folder, rate limits off, and stopped by `stop`.
 */
export const SYNAPSE_VERSION = '1.163.2';

const CACHE_ROOT = process.env['SYNAPSE_CACHE_DIR'] ?? join(homedir(), '.cache', 'matrix-push-worker');

/** Why Synapse cannot run here, or undefined when it can. */
export function synapseUnavailable(): string | undefined {
  const python = spawnSync('python3', ['-m', 'venv', '--help'], { stdio: 'ignore' });
  if (python.status !== 0) return 'python3 with venv is not installed';
  return undefined;
}

/**
 * The virtualenv's python, installing Synapse first when the cache has
 * none. Idempotent: a venv is used only once its install finished (a
 * marker file), so an interrupted install is redone from scratch.
 */
export function synapsePython(): string {
  const root = join(CACHE_ROOT, `synapse-${SYNAPSE_VERSION}`);
  const venv = join(root, 'venv');
  const python = join(venv, 'bin', 'python');
  const complete = join(venv, '.complete');
  if (existsSync(complete)) return python;
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  run('python3', ['-m', 'venv', venv]);
  run(join(venv, 'bin', 'pip'), ['install', '--quiet', `matrix-synapse[postgres]==${SYNAPSE_VERSION}`]);
  writeFileSync(complete, `${new Date().toISOString()}\n`);
  return python;
}

/**
 * Installs a Python package (a folder, as pip takes it) into Synapse's
 * virtualenv, so that Synapse can load a module from it.
 */
export function installIntoSynapse(packagePath: string): void {
  const python = synapsePython();
  run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', packagePath]);
}

function run(command: string, args: readonly string[]): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr}`);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
  });
}

/** Synapse's database: its own SQLite file, or a PostgreSQL database. */
export type SynapseDatabase =
  | { readonly kind: 'sqlite' }
  | {
      readonly kind: 'postgres';
      readonly host: string;
      readonly port: number;
      readonly user: string;
      readonly database: string;
      /** Synapse's connection pool to it (`cp_max`; 2 unless given: tests need few). */
      readonly connections?: number;
    };

/** What a test adds to Synapse's configuration. */
export interface SynapseOptions {
  /** The `modules` list: each loaded from Synapse's virtualenv (see `installIntoSynapse`). */
  readonly modules?: readonly { readonly module: string; readonly config: unknown }[];
  /** Serve `/_synapse/metrics` on a port of its own (`metricsUrl`). */
  readonly metrics?: boolean;
  /** Log levels by logger name, in `homeserver.log` (WARNING for everything else). */
  readonly logLevels?: Readonly<Record<string, string>>;
  /** More top-level settings of `homeserver.yaml`. */
  readonly settings?: Readonly<Record<string, unknown>>;
}

export interface RegisteredUser {
  readonly userId: string;
  readonly token: string;
  readonly deviceId: string;
}

export interface SynapseServer {
  readonly serverName: string;
  readonly baseUrl: string;
  /** The SQLite file, when Synapse runs on SQLite. */
  readonly sqlitePath?: string;
  /** Where Synapse's metrics are served, when asked for. */
  readonly metricsUrl?: string;
  /** Synapse's process, whose CPU a benchmark reads. */
  readonly pid: number | undefined;
  /** A user registered through the shared-secret admin API; their access token and device. */
  register(localpart: string, admin?: boolean): Promise<RegisteredUser>;
  /** A new session (device) of a registered user, by password. */
  login(localpart: string): Promise<{ readonly token: string; readonly deviceId: string }>;
  /** A client-server API request; throws on a status other than 2xx with the body. */
  request(token: string, method: string, path: string, body?: unknown): Promise<unknown>;
  /** The end of Synapse's log, to show when a test fails. */
  logTail(): string;
  stop(): Promise<void>;
}

const SHARED_SECRET = 'import-test-shared-secret';

/** Starts Synapse and waits until it answers. */
export async function startSynapse(database: SynapseDatabase, options: SynapseOptions = {}): Promise<SynapseServer> {
  const python = synapsePython();
  const dir = mkdtempSync(join(tmpdir(), 'synapse-import-'));
  const port = await freePort();
  const metricsPort = options.metrics === true ? await freePort() : undefined;
  const serverName = 'import.test';
  const sqlitePath = join(dir, 'homeserver.db');
  const config = {
    server_name: serverName,
    pid_file: join(dir, 'homeserver.pid'),
    public_baseurl: `http://127.0.0.1:${port}/`,
    listeners: [
      {
        port,
        bind_addresses: ['127.0.0.1'],
        type: 'http',
        tls: false,
        x_forwarded: false,
        resources: [{ names: ['client'], compress: false }],
      },
      ...(metricsPort === undefined
        ? []
        : [{ port: metricsPort, bind_addresses: ['127.0.0.1'], type: 'metrics', tls: false }]),
    ],
    ...(metricsPort === undefined ? {} : { enable_metrics: true }),
    ...(options.modules === undefined ? {} : { modules: options.modules }),
    ...options.settings,
    database:
      database.kind === 'sqlite'
        ? { name: 'sqlite3', args: { database: sqlitePath } }
        : {
            name: 'psycopg2',
            args: {
              host: database.host,
              port: database.port,
              user: database.user,
              dbname: database.database,
              cp_min: 1,
              cp_max: database.connections ?? 2,
            },
          },
    log_config: join(dir, 'log.yaml'),
    media_store_path: join(dir, 'media'),
    signing_key_path: join(dir, 'signing.key'),
    registration_shared_secret: SHARED_SECRET,
    report_stats: false,
    trusted_key_servers: [],
    suppress_key_server_warning: true,
    // Rate limits off: the test sends many requests from one address.
    rc_message: { per_second: 10000, burst_count: 10000 },
    rc_registration: { per_second: 10000, burst_count: 10000 },
    rc_login: {
      address: { per_second: 10000, burst_count: 10000 },
      account: { per_second: 10000, burst_count: 10000 },
      failed_attempts: { per_second: 10000, burst_count: 10000 },
    },
    rc_admin_redaction: { per_second: 10000, burst_count: 10000 },
    rc_joins: { local: { per_second: 10000, burst_count: 10000 }, remote: { per_second: 10000, burst_count: 10000 } },
  };
  // JSON is YAML: no YAML writer needed.
  writeFileSync(join(dir, 'homeserver.yaml'), JSON.stringify(config, null, 2));
  writeFileSync(
    join(dir, 'log.yaml'),
    JSON.stringify({
      version: 1,
      formatters: { plain: { format: '%(asctime)s %(levelname)s %(name)s %(message)s' } },
      handlers: { file: { class: 'logging.FileHandler', filename: join(dir, 'homeserver.log'), formatter: 'plain' } },
      root: { level: 'WARNING', handlers: ['file'] },
      loggers: Object.fromEntries(Object.entries(options.logLevels ?? {}).map(([name, level]) => [name, { level }])),
      disable_existing_loggers: false,
    }),
  );
  const configArgs = ['-m', 'synapse.app.homeserver', '--config-path', join(dir, 'homeserver.yaml')];
  run(python, [...configArgs, '--generate-keys']);
  const child = spawn(python, configArgs, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const server: SynapseServer = {
    serverName,
    baseUrl,
    pid: child.pid,
    ...(database.kind === 'sqlite' ? { sqlitePath } : {}),
    ...(metricsPort === undefined ? {} : { metricsUrl: `http://127.0.0.1:${metricsPort}/_synapse/metrics` }),
    register: async (localpart, admin = false) => register(baseUrl, localpart, admin),
    login: async (localpart) => login(baseUrl, localpart),
    request: async (token, method, path, body) => request(baseUrl, token, method, path, body),
    logTail: () => {
      try {
        return readFileSync(join(dir, 'homeserver.log'), 'utf8').slice(-8000);
      } catch {
        return '(no log)';
      }
    },
    stop: async () => {
      await stopProcess(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitForHealth(baseUrl, child, () => stderr);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server;
}

async function waitForHealth(baseUrl: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`Synapse exited with ${child.exitCode}: ${stderr()}`);
    try {
      const response = await fetch(`${baseUrl}/health`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`Synapse did not answer within 120 s: ${stderr()}`);
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

async function register(baseUrl: string, localpart: string, admin: boolean): Promise<RegisteredUser> {
  const url = `${baseUrl}/_synapse/admin/v1/register`;
  const { nonce } = (await (await fetch(url)).json()) as { nonce: string };
  const password = `pw-${localpart}`;
  const mac = createHmac('sha1', SHARED_SECRET)
    .update(`${nonce}\0${localpart}\0${password}\0${admin ? 'admin' : 'notadmin'}`)
    .digest('hex');
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ nonce, username: localpart, password, admin, mac }),
  });
  const body = (await response.json()) as { user_id?: string; access_token?: string; device_id?: string };
  if (!response.ok || body.user_id === undefined || body.access_token === undefined || body.device_id === undefined)
    throw new Error(`registering ${localpart} failed: ${response.status} ${JSON.stringify(body)}`);
  return { userId: body.user_id, token: body.access_token, deviceId: body.device_id };
}

async function login(
  baseUrl: string,
  localpart: string,
): Promise<{ readonly token: string; readonly deviceId: string }> {
  const body = (await request(baseUrl, '', 'POST', '/_matrix/client/v3/login', {
    type: 'm.login.password',
    identifier: { type: 'm.id.user', user: localpart },
    password: `pw-${localpart}`,
  })) as { access_token: string; device_id: string };
  return { token: body.access_token, deviceId: body.device_id };
}

async function request(baseUrl: string, token: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...(token === '' ? {} : { authorization: `Bearer ${token}` }), 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text === '' ? {} : (JSON.parse(text) as unknown);
}
