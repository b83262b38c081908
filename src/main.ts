import { loadConfig } from './config/load-config.js';
import { runProcess } from './lifecycle/run-process.js';
import { createWorkerProcess } from './worker-process.js';

/**
 * `npm start`: one worker process.
 *
 * SIGTERM/SIGINT: stop consuming, answer every request in flight, close
 * connections, exit 0. A second signal, or `shutdown.timeoutMs` passing,
 * exits 1 at once; requests not yet acknowledged then go back to the queue.
 */
runProcess({
  name: 'matrix-push-worker',
  loadConfig: () => loadConfig(),
  logLevel: (config) => config.log.level,
  shutdownTimeoutMs: (config) => config.shutdown.timeoutMs,
  create: (config, log, stop) => createWorkerProcess(config, log, stop),
});
