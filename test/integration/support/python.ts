import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Why the project's Python cannot run here (no python3 3.10+ with venv), or undefined when it can. */
export function pythonMissing(): string | undefined {
  const probe = spawnSync('python3', ['-c', 'import sys, venv, ensurepip; assert sys.version_info >= (3, 10)'], {
    encoding: 'utf8',
  });
  if (probe.error !== undefined) return 'python3 is not installed';
  if (probe.status !== 0) return `python3 (3.10 or later) with its venv module is missing: ${probe.stderr.trim()}`;
  return undefined;
}

/** The project's virtualenv (scripts/python-venv.sh: made when missing, clients/python[test] installed). */
export function pythonVenv(): string {
  const result = spawnSync(`${ROOT}scripts/python-venv.sh`, [], { cwd: ROOT, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`scripts/python-venv.sh failed: ${result.stderr}`);
  return result.stdout.trim();
}
