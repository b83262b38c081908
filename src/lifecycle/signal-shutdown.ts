import type { Logger } from '../logging/logger.js';

export interface SignalShutdownOptions {
  /** Closes everything in order; resolves when it is safe to exit 0. */
  readonly close: () => Promise<void>;
  /** After the first signal, exit 1 anyway once this long has passed. */
  readonly timeoutMs: number;
  readonly inFlight: () => number;
  readonly log: Logger;
  readonly exit: (code: number) => void;
  /** Told at the first signal, e.g. to stop waiting for a database at start-up. */
  readonly abort: AbortController;
}

/**
 * The handler for SIGTERM/SIGINT: the first signal closes gracefully and
 * exits 0; a second signal, the timeout, or a failing close exits 1 at
 * once (requests not yet acknowledged then go back to the queue).
 */
export function signalShutdown(options: SignalShutdownOptions): (signal: NodeJS.Signals) => void {
  const { close, timeoutMs, inFlight, log, exit, abort } = options;
  return (signal) => {
    if (abort.signal.aborted) {
      log.warn({ signal, inFlight: inFlight() }, 'second signal: exiting now');
      exit(1);
      return;
    }
    abort.abort();
    log.info({ signal, inFlight: inFlight() }, 'stopping: finishing requests in flight');
    setTimeout(() => {
      log.error({ inFlight: inFlight(), timeoutMs }, 'shutdown timed out: exiting now');
      exit(1);
    }, timeoutMs).unref();
    close().then(
      () => {
        log.info('stopped');
        exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed: exiting now');
        exit(1);
      },
    );
  };
}

/** Installs `signalShutdown` for SIGTERM and SIGINT: what each process entry point does. */
export function handleStopSignals(options: SignalShutdownOptions): void {
  const stop = signalShutdown(options);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
