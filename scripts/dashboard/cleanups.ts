/**
 * What scripts/check-dashboard.ts leaves running or writes (Prometheus, its
 * own worker and gateway, their queues and database, temporary folders),
 * undone at the end, in reverse order, even when it fails or is interrupted.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { log } from './log.js';

export const cleanups: (() => Promise<unknown>)[] = [];

export async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      log(`cleaning up: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
