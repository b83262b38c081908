import { loadConfig } from '../../../src/config/load-config.js';
import { runProcess } from '../../../src/lifecycle/run-process.js';
import type { Logger } from '../../../src/logging/logger.js';
import type { Command } from '../../../src/service/command.js';
import { createWorkerProcess, type ServeHooks } from '../../../src/worker-process.js';

/**
 * The fault tests' worker: the production worker (the same `runProcess`
 * and `createWorkerProcess` as src/main.ts) with crash hooks, read from
 * the environment of the test that starts it. The process dies the way an
 * out-of-memory kill or a segfault would (SIGKILL), with the request
 * unacknowledged:
 *
 * - `FAULT_CRASH_ON_USER_ID`: on taking a request for this user, before
 *   serving it (a poison request);
 * - `FAULT_CRASH_AFTER_APPLY_ON_USER_ID`: after applying a request for
 *   this user, before replying (a lost reply).
 *
 * Production code knows nothing of these: only this file reads them.
 */
function crashHooks(env: NodeJS.ProcessEnv, log: Logger): ServeHooks {
  const crashFor = (userId: string, when: string) => {
    log.warn({ userId, when }, 'TEST-ONLY fault injection is on: this worker crashes on requests for this user');
    return (command: Command) => {
      if (command.userId !== userId) return;
      log.fatal({ userId, when }, 'fault injection: crashing');
      process.kill(process.pid, 'SIGKILL');
    };
  };
  const before = env['FAULT_CRASH_ON_USER_ID'] ?? '';
  const after = env['FAULT_CRASH_AFTER_APPLY_ON_USER_ID'] ?? '';
  return {
    ...(before === '' ? {} : { beforeServe: crashFor(before, 'before serving') }),
    ...(after === '' ? {} : { afterServe: crashFor(after, 'after applying') }),
  };
}

runProcess({
  name: 'matrix-push-worker',
  loadConfig: () => loadConfig(),
  logLevel: (config) => config.log.level,
  shutdownTimeoutMs: (config) => config.shutdown.timeoutMs,
  create: (config, log, stop) => createWorkerProcess(config, log, stop, crashHooks(process.env, log)),
});
