import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pythonMissing, pythonVenv } from './python-venv.js';
import { runCommand } from './run-command.js';
import type { AdapterCommand } from './wire-adapter-process.js';

/**
 * Every client's wire adapter, by the command issue 41 fixes for it
 * (docs/rpc-contract.md#examples): what it needs to run here, what makes
 * it ready (a virtualenv, a build), and the command, started in the
 * repository's root with AMQP_URL and PUBLISHER_USER_ID set.
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const RUST_MANIFEST = 'clients/rust/Cargo.toml';

export interface ClientAdapter {
  readonly client: string;
  /** Why it cannot run here, or undefined. */
  missing(): string | undefined;
  /** Makes it ready to start; resolves with its command (without the environment). */
  prepare(): Promise<Omit<AdapterCommand, 'env'>>;
  /** How long `prepare` may take: a first Rust build compiles every dependency. */
  readonly prepareTimeoutMs: number;
}

function cargoMissing(): string | undefined {
  if (!existsSync(`${ROOT}${RUST_MANIFEST}`)) return `${RUST_MANIFEST} does not exist (the Rust client is not here)`;
  const probe = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) return 'cargo is not installed';
  return undefined;
}

const RUST_ARGS = ['-q', '--release', '--manifest-path', RUST_MANIFEST, '--example', 'wire'];

export const CLIENT_ADAPTERS: readonly ClientAdapter[] = [
  {
    client: 'TypeScript',
    missing: () => undefined,
    prepare: async () => Promise.resolve({ command: 'npm', args: ['run', '--silent', 'wire'], cwd: ROOT }),
    prepareTimeoutMs: 10_000,
  },
  {
    client: 'Python',
    missing: pythonMissing,
    prepare: async () => {
      const venv = await pythonVenv();
      return { command: `${venv}/bin/python`, args: ['-m', 'matrix_push_worker.wire'], cwd: ROOT };
    },
    prepareTimeoutMs: 600_000,
  },
  {
    client: 'Rust',
    missing: cargoMissing,
    prepare: async () => {
      // Built first, so that the first request does not wait for the compiler; `cargo run` then only starts it.
      const build = await runCommand('cargo', ['build', ...RUST_ARGS], { cwd: ROOT });
      if (build.code !== 0) throw new Error(`cargo build ${RUST_ARGS.join(' ')} failed: ${build.stderr}`);
      return { command: 'cargo', args: ['run', ...RUST_ARGS], cwd: ROOT };
    },
    prepareTimeoutMs: 1_800_000,
  },
];
