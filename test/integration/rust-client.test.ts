import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';

/**
 * The Rust client (clients/rust) as the suite runs it: scripts/rust-client.sh runs cargo fmt
 * --check, clippy with warnings denied, and cargo test against a real worker process (its own
 * queues and database) on this run's broker and MongoDB, the wire adapter among them. Builds are
 * kept in ~/.cache/matrix-push-worker/rust-client-target (crates from crates.io, Cargo.lock).
 * This file fails when the script does, with its output. Skipped only where no Rust toolchain
 * (cargo with rustfmt and clippy) is installed.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = `${ROOT}scripts/rust-client.sh`;

function rustMissing(): string | undefined {
  for (const args of [['--version'], ['fmt', '--version'], ['clippy', '--version']]) {
    const probe = spawnSync('cargo', args, { encoding: 'utf8' });
    if (probe.error !== undefined) return 'cargo is not installed';
    if (probe.status !== 0) return `\`cargo ${args.join(' ')}\` failed: ${probe.stderr.trim()}`;
  }
  return undefined;
}

const missing = rustMissing();
if (missing !== undefined) console.warn(`[rust client] skipped: ${missing}`);

async function run(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn(SCRIPT, [], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  return { code, output };
}

describe.skipIf(missing !== undefined)('the Rust client', () => {
  // A clean machine compiles the crate and its dependencies first: minutes on two cores.
  it('passes rustfmt, clippy and its cargo test suite against a real worker', { timeout: 1_800_000 }, async () => {
    const { code, output } = await run({
      ...process.env,
      AMQP_URL: inject('amqpUrl'),
      MONGODB_URL: inject('mongoUrl'),
      // The worker runs on this Node (the system's may be older than the project needs).
      MPW_NODE: process.execPath,
    });
    if (code !== 0) console.error(output);
    expect(code, `scripts/rust-client.sh exited with ${String(code)}; its output is above`).toBe(0);
  });
});
