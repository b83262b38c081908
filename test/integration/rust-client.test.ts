import { spawnSync } from 'node:child_process';
import { describe, it } from 'vitest';
import { expectClientScriptPasses } from './support/client-script.js';

/**
 * The Rust client (clients/rust) as the suite runs it: scripts/rust-client.sh runs cargo fmt
 * --check, clippy with warnings denied, and cargo test against a real worker process (its own
 * queues and database) on this run's broker and MongoDB, the wire adapter among them. Builds are
 * kept in ~/.cache/matrix-push-worker/rust-client-target (crates from crates.io, Cargo.lock).
 * This file fails when the script does, with its output. Skipped only where no Rust toolchain
 * (cargo with rustfmt and clippy) is installed.
 */
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

describe.skipIf(missing !== undefined)('the Rust client', () => {
  // A clean machine compiles the crate and its dependencies first: minutes on two cores.
  it('passes rustfmt, clippy and its cargo test suite against a real worker', { timeout: 1_800_000 }, async () => {
    await expectClientScriptPasses('rust-client.sh');
  });
});
