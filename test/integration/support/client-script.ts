import { fileURLToPath } from 'node:url';
import { expect, inject } from 'vitest';
import { runCommand } from './run-command.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * Runs a client's check script (`scripts/<name>`) against this run's broker and MongoDB, the
 * worker on this Node (the system's may be older than the project needs), and fails with the
 * script's output when it exits other than 0.
 */
export async function expectClientScriptPasses(name: string): Promise<void> {
  const { code, stdout, stderr } = await runCommand(`${ROOT}scripts/${name}`, [], {
    cwd: ROOT,
    env: { ...process.env, AMQP_URL: inject('amqpUrl'), MONGODB_URL: inject('mongoUrl'), MPW_NODE: process.execPath },
  });
  if (code !== 0) console.error(`${stdout}\n${stderr}`);
  expect(code, `scripts/${name} exited with ${String(code)}; its output is above`).toBe(0);
}
