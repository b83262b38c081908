import { ConfigError } from '../config/load-config.js';
import { createLogger, type Logger } from '../logging/logger.js';
import { listenAndLog, type HealthServer } from '../observability/health-server.js';
import { handleFatalErrors } from './fatal-errors.js';
import { handleStopSignals } from './signal-shutdown.js';

/** What a process built from its configuration hands to the skeleton. */
export interface ServiceProcess {
  /** Listened on before `start`, so that probes answer while it starts. */
  readonly health: HealthServer | undefined;
  readonly healthHost: string;
  /** Requests in flight, for the shutdown's log lines. */
  readonly inFlight: () => number;
  /** Closes everything in order; resolves when it is safe to exit 0. */
  readonly close: () => Promise<void>;
  /** Connects and serves; returns early once the stop signal aborted. */
  readonly start: () => Promise<void>;
}

export interface ProcessSpec<C> {
  /** Names the process in its log lines and in what it writes to stderr. */
  readonly name: string;
  /** Throws `ConfigError` for a configuration the process cannot run with. */
  readonly loadConfig: () => C;
  readonly logLevel: (config: C) => string;
  readonly shutdownTimeoutMs: (config: C) => number;
  /** Builds the process; `stop` aborts at the first SIGTERM/SIGINT (a wait at start-up ends then). */
  readonly create: (config: C, log: Logger, stop: AbortController) => ServiceProcess;
}

/**
 * The skeleton every entry point runs (the worker, the gateway, and the
 * fault tests' worker):
 *
 * 1. the configuration, validated once: an invalid one is one line on
 *    stderr and exit code 2;
 * 2. the logger, and errors nothing handled logged at `fatal` with exit 1;
 * 3. SIGTERM/SIGINT: stop, answer what is in flight, close, exit 0; a
 *    second signal or the shutdown timeout exits 1;
 * 4. the health and metrics listener;
 * 5. `start`; a failure to start is one line on stderr and exit code 1.
 */
export function runProcess<C>(spec: ProcessSpec<C>): void {
  run(spec).catch((error: unknown) => {
    process.stderr.write(`${spec.name}: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}

async function run<C>(spec: ProcessSpec<C>): Promise<void> {
  let config: C;
  try {
    config = spec.loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${spec.name}: ${error.message}\n`);
    process.exit(2);
  }
  const log = createLogger(spec.logLevel(config), spec.name);
  handleFatalErrors(log);
  const stop = new AbortController();
  const service = spec.create(config, log, stop);
  handleStopSignals({
    abort: stop,
    timeoutMs: spec.shutdownTimeoutMs(config),
    inFlight: service.inFlight,
    log,
    exit: (code) => process.exit(code),
    close: service.close,
  });
  await listenAndLog(service.health, service.healthHost, log);
  await service.start();
}
