import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runCommand } from './run-command.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Why the Python client cannot run here (no python3 3.10+ with venv), or undefined when it can. */
export function pythonMissing(): string | undefined {
  const probe = spawnSync('python3', ['-c', 'import sys, venv, ensurepip; assert sys.version_info >= (3, 10)'], {
    encoding: 'utf8',
  });
  if (probe.error !== undefined) return 'python3 is not installed';
  if (probe.status !== 0) return `python3 (3.10 or later) with its venv module is missing: ${probe.stderr.trim()}`;
  return undefined;
}

/** The folder of the Python client's virtualenv, made or brought up to date by scripts/python-venv.sh. */
export async function pythonVenv(): Promise<string> {
  const { code, stdout, stderr } = await runCommand(`${ROOT}scripts/python-venv.sh`, [], { cwd: ROOT });
  if (code !== 0) throw new Error(`scripts/python-venv.sh exited with ${String(code)}: ${stderr}`);
  return stdout.trim();
}
