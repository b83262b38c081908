import { rmSync } from 'node:fs';
import { outageCheckPassed, type OutageCheck } from './outage-check.js';

/**
 * A run's own log file, kept when the outage's per-device check failed or
 * did not finish (its path logged), deleted when it passed.
 */
export function keepIfFailed(file: string, check: OutageCheck | undefined, log: (line: string) => void): void {
  if (check !== undefined && outageCheckPassed(check)) {
    rmSync(file, { force: true });
    return;
  }
  log(`delivery/outage: the worker's log is kept at ${file}`);
}
