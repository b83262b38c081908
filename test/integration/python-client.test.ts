import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { pythonMissing } from './support/python-venv.js';

/**
 * The Python client (clients/python) as the suite runs it: scripts/python-client.sh makes its
 * virtualenv, installs it from PyPI with its test extra, and runs ruff, mypy --strict and pytest
 * against a real worker process (its own queues and database) on this run's broker and MongoDB.
 * This file fails when the script does, with its output. Skipped only where Python 3 or its venv
 * module is missing.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = `${ROOT}scripts/python-client.sh`;

const missing = pythonMissing();
if (missing !== undefined) console.warn(`[python client] skipped: ${missing}`);

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

describe.skipIf(missing !== undefined)('the Python client', () => {
  it('passes ruff, mypy --strict and its pytest suite against a real worker', { timeout: 900_000 }, async () => {
    const { code, output } = await run({
      ...process.env,
      AMQP_URL: inject('amqpUrl'),
      MONGODB_URL: inject('mongoUrl'),
      // The worker runs on this Node (the system's may be older than the project needs).
      MPW_NODE: process.execPath,
    });
    if (code !== 0) console.error(output);
    expect(code, `scripts/python-client.sh exited with ${String(code)}; its output is above`).toBe(0);
  });
});
